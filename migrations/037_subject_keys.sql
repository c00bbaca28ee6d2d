-- Per-person keys: each person has a data key of their own within each
-- organization (a "subject key"), and their flows' personal data is sealed
-- under it. The key is kept sealed by the data key (FLOWD_DATA_KEY, under
-- the key named pii_key_id), which acts as its key encryption key.
-- Destroying it (key_sealed set to null, destroyed_at set) leaves nothing
-- sealed under it that can be opened again, in this database or in a
-- backup that a later re-applied erasure reaches.
--
-- subject is a keyed HMAC of the normalised national id within the
-- organization, never the id itself; national_id_sealed holds the id under
-- the subject key, so that a rotation of the data key can hash it again and
-- the person's page can index it. The blind index of the person's page
-- (person_index, migration 032) is kept here for the flows sealed under the
-- key: it goes with the key. A destroyed key's row stays, without anything
-- of the person, as the record of when it was destroyed; a later flow of
-- the same person makes a new key.
create table subject_keys (
    organization_id    text not null,
    id                 uuid not null,
    subject            bytea not null,
    pii_key_id         text not null,
    key_sealed         bytea,
    national_id_sealed bytea,
    person_index       bytea,
    person_index_key   text,
    created_at         timestamptz not null default now(),
    destroyed_at       timestamptz,
    primary key (organization_id, id),
    check ((destroyed_at is null) = (key_sealed is not null))
);
-- One live key per person and organization: two creates for one person
-- that race end with one key.
create unique index subject_keys_subject_idx on subject_keys (organization_id, subject) where destroyed_at is null;
create index subject_keys_person_index_idx on subject_keys (person_index) where person_index is not null;

-- A flow names the subject key its personal data is sealed under; null
-- while it is still sealed under the data key itself (until
-- "flowd flows rekey" has moved it).
do $$
begin
    execute 'alter table flows add column subject_key_id uuid';
    execute 'create index flows_subject_key_idx on flows (organization_id, subject_key_id) where subject_key_id is not null';
    execute 'create index flows_unkeyed_idx on flows (organization_id, id) where subject_key_id is null';
end
$$;
