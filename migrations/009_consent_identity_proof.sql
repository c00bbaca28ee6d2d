-- When the individual first proved to be the person a consent request is
-- for: a step of the consent timeline the console shows.
alter table consent_requests add column identity_proven_at timestamptz;
