-- Recovery of an endpoint's failed deliveries: a request re-sends
-- every delivery to one endpoint that failed since a time, as a background
-- job that works in batches. A row records the request and its progress, and
-- holds the job's cursor, so that a job that dies resumes after the last
-- batch it committed. The organization id leads the key (Citus).
create table webhook_recoveries (
    organization_id text not null,
    id              uuid not null,                -- UUID v7
    endpoint_id     uuid not null,
    since           timestamptz not null,         -- deliveries created at or after it
    state           text not null default 'queued'
                    check (state in ('queued', 'running', 'done', 'failed')),
    total           integer not null,             -- failed deliveries when it was requested
    scheduled       integer not null default 0,   -- how many it has sent again so far
    -- The last delivery of the last committed batch, by (created_at, id).
    cursor_created_at timestamptz,
    cursor_id       uuid,
    requested_by    text not null,                -- client:<id> or staff:<username>
    created_at      timestamptz not null default now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    error           text not null default '',
    primary key (organization_id, id)
);

-- One recovery at a time per endpoint: a second request while one is queued
-- or running is refused by this index, also when two arrive at once.
create unique index webhook_recoveries_active on webhook_recoveries (organization_id, endpoint_id)
    where state in ('queued', 'running');
-- An endpoint's recoveries, newest first.
create index webhook_recoveries_by_endpoint on webhook_recoveries (organization_id, endpoint_id, created_at desc);

-- An endpoint's deliveries in the order a recovery pages them; it replaces
-- migration 017's index, of which it is a prefix. No column a delivery's
-- attempt updates (state) is in it, not even in its predicate, so that an
-- attempt updates the row in place (HOT, migration 020); a recovery skips
-- the deliveries that are not failed.
drop index webhook_events_endpoint;
create index webhook_events_endpoint on webhook_events (organization_id, endpoint_id, created_at, id)
    where endpoint_id is not null;
