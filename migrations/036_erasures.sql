-- A consent definition version may say how long a completed flow is kept
-- (retention, an ISO 8601 duration like validity); the flows module's
-- leader erases completed flows past it. On Citus the table is distributed
-- by now, so the change runs on its own, in the DO block.
do $$
begin
    execute 'alter table consent_definition_versions add column retention text';
end
$$;

-- Erasures: an organization erases a person, named by their national id.
-- The tombstone keeps no national id: subject is the person's receipt
-- subject (a keyed hash under the organization's receipt salt), and
-- subject_key a keyed hash under a key derived from the key encryption
-- key, which `flowd erasures reapply` uses to find the person's flows again
-- in a database restored from a backup taken before the erasure.
create table erasures (
    organization_id   text not null,
    id                uuid not null,
    subject           text not null,
    subject_key       bytea not null,
    flow_count        integer not null,
    keep_receipts     boolean not null,
    key_destroyed_at  timestamptz,
    erased_by         text not null,
    erased_at         timestamptz not null,
    receipt           text not null,
    primary key (organization_id, id)
);
-- An organization's erasures, newest first; a person's, by subject.
create index erasures_by_time on erasures (organization_id, erased_at desc, id desc);
create index erasures_by_subject on erasures (organization_id, subject_key);

-- The consent receipts an erasure kept as evidence (keepReceipts): they
-- name the person only by their subject.
create table erasure_kept_receipts (
    organization_id text not null,
    erasure_id      uuid not null,
    receipt_id      text not null,
    flow_id         uuid not null,
    receipt         text not null,
    primary key (organization_id, erasure_id, receipt_id),
    foreign key (organization_id, erasure_id) references erasures (organization_id, id) on delete cascade
);

-- A person's request, from their own page, that an organization erase
-- them: kept by keyed hashes of the person (subject_key within the
-- organization, person_key across organizations, under the same key as
-- subject_key), so that it outlives the flows an erasure removes and the
-- person's page can say when it was done.
create table erasure_requests (
    organization_id text not null,
    id              uuid not null,
    subject_key     bytea not null,
    person_key      bytea not null,
    reference       text not null,
    requested_at    timestamptz not null,
    primary key (organization_id, id)
);
create index erasure_requests_by_person on erasure_requests (person_key, requested_at desc);
