-- The flows module: flows, their tasks and incidents, idempotency keys of
-- creates, the deletion log, and a flow-number sequence per organization.
-- organization_id is the identity module's id, kept as text: modules do not
-- reach into each other's tables.

create table flows (
    id                  uuid primary key,
    organization_id     text not null,
    flow_number         bigint not null,
    reference_id        text not null,
    reference_name      text,
    version             integer not null default 1,
    consent_status      text not null default 'Unopened'
                        check (consent_status in ('Unopened', 'Opened', 'Rejected', 'Accepted')),
    process_status      text not null default 'active'
                        check (process_status in ('active', 'completed', 'cancelled')),
    -- archived is what list pages filter on; generated so it can never disagree.
    archived            boolean generated always as (process_status <> 'active') stored,
    sandbox             boolean not null,
    -- Personal data, sealed by internal/pii under the key named pii_key_id.
    pii_key_id          text not null,
    national_id_sealed  bytea not null,
    national_id_hmac    bytea not null,
    last_name_sealed    bytea not null,
    redirect_url        text not null,
    webhook_url         text not null default '',
    organization_number text not null default '',
    process_instance_id uuid not null,
    process_version     text not null default '1',
    created_by          text not null,
    has_errors          boolean not null default false,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now(),
    opened_at           timestamptz,
    decided_at          timestamptz,
    expires_at          timestamptz not null,
    constraint flows_org_number_key unique (organization_id, flow_number),
    constraint flows_org_reference_key unique (organization_id, reference_id)
);

-- Pages walk these indexes from a cursor: a deep page costs what the first does.
create index flows_page_idx on flows (organization_id, archived, created_at desc, id desc);
create index flows_page_status_idx on flows (organization_id, archived, consent_status, created_at desc, id desc);
create index flows_national_id_idx on flows (organization_id, national_id_hmac);
create index flows_expiry_idx on flows (expires_at) where process_status = 'active';

create table flow_tasks (
    id              uuid primary key,
    flow_id         uuid not null references flows (id) on delete cascade,
    task_type       text not null,
    task_category   text not null,
    status          text not null check (status in ('pending', 'completed', 'failed', 'cancelled')),
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);
create index flow_tasks_flow_idx on flow_tasks (flow_id, created_at, id);

create table flow_incidents (
    id          uuid primary key,
    flow_id     uuid not null references flows (id) on delete cascade,
    task_id     uuid not null references flow_tasks (id) on delete cascade,
    task_type   text not null,
    message     text not null,
    opened_at   timestamptz not null default now(),
    resolved_at timestamptz
);
-- A task has at most one open incident.
create unique index flow_incidents_open_idx on flow_incidents (task_id) where resolved_at is null;
create index flow_incidents_flow_idx on flow_incidents (flow_id) where resolved_at is null;

-- Idempotency keys of creates, per organization, for 24 hours. The row is
-- written first in the create's transaction, so a concurrent request with the
-- same key waits on it and then replays instead of creating a second flow.
create table flow_idempotency_keys (
    organization_id text not null,
    key             text not null,
    request_hash    bytea not null,
    flow_id         uuid not null,
    reference_id    text not null default '',
    pii_key_id      text not null,
    consent_sealed  bytea,
    created_at      timestamptz not null default now(),
    expires_at      timestamptz not null,
    primary key (organization_id, key)
);
create index flow_idempotency_keys_expiry_idx on flow_idempotency_keys (expires_at);

-- The deletion log keeps nothing personal.
create table flow_deletions (
    id              bigint generated always as identity primary key,
    organization_id text not null,
    flow_id         uuid not null,
    reference_id    text not null,
    deleted_by      text not null,
    deleted_at      timestamptz not null default now()
);
create index flow_deletions_page_idx on flow_deletions (organization_id, deleted_at desc, id desc);

-- flowd_next_flow_number hands out an organization's next flow number from a
-- sequence of its own, created on first use. Sequences are not transactional,
-- so concurrent creates never wait on one another (gaps are allowed); only the
-- very first creates of an organization serialize, on an advisory lock, so
-- that two of them cannot both try to create the sequence.
create function flowd_next_flow_number(org text) returns bigint
language plpgsql as $$
declare
    seq text := 'flow_number_' || md5(org);
begin
    if to_regclass(seq) is null then
        perform pg_advisory_xact_lock(hashtextextended(seq, 0));
        execute format('create sequence if not exists %I as bigint', seq);
    end if;
    return nextval(seq::regclass);
end;
$$;
