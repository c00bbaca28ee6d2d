-- An acceptance with a validity expires when it ends: Expired,
-- and when, the flow keeps.
alter table flows drop constraint flows_consent_status_check;
alter table flows add constraint flows_consent_status_check
    check (consent_status in ('Unopened', 'Opened', 'Rejected', 'Accepted', 'Withdrawn', 'Expired'));
alter table flows add column expired_at timestamptz;

-- The expiry sweep finds the acceptances that are due.
create index flows_acceptances_by_validity on flows (valid_until)
    where consent_status = 'Accepted' and valid_until is not null;

-- The flows module's River job queue (consent expiry) has tables of its own:
-- River elects one leader per schema, and the leader schedules, rescues and
-- runs the periodic jobs of only the job kinds its own client knows.
-- database.Migrate applies River's migrations here.
create schema if not exists flows_river;
