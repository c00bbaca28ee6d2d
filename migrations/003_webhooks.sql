-- webhooks: each organization's signing secrets, the outbox of
-- events (delivered by River jobs inserted in the same transaction), and every
-- delivery attempt, kept for the console. Organization, flow and task ids are
-- other modules' and are kept as plain text, without foreign keys.

create table webhook_secrets (
    organization_id     text primary key,
    secret              text not null,            -- whsec_<base64>, or v1:<AES-GCM sealed> under FLOWD_KEY_ENCRYPTION_KEY
    created_at          timestamptz not null default now(),
    previous_secret     text,                     -- signs too until previous_expires_at
    previous_expires_at timestamptz
);

create table webhook_events (
    id              uuid primary key,             -- the webhook-id header, the same on every retry
    organization_id text not null,
    flow_id         text not null,
    task_id         text not null default '',     -- empty for flow.deleted
    type            text not null,
    url             text not null,
    body            text not null,                -- the exact JSON that is signed and sent
    state           text not null default 'pending'
                    check (state in ('pending', 'delivered', 'failed', 'cancelled')),
    last_error      text not null default '',
    job_id          bigint not null,              -- the River job that delivers it
    created_at      timestamptz not null default now(),
    finished_at     timestamptz
);

create index webhook_events_flow on webhook_events (flow_id, created_at desc);
create index webhook_events_task on webhook_events (organization_id, task_id, created_at desc) where task_id <> '';
create index webhook_events_finished on webhook_events (finished_at) where state <> 'pending';

create table webhook_attempts (
    id           bigint generated always as identity primary key,
    event_id     uuid not null references webhook_events (id) on delete cascade,
    attempted_at timestamptz not null,
    status_code  integer not null default 0,      -- 0 when no response came
    error        text not null default '',        -- empty on success
    latency_us   bigint not null
);

create index webhook_attempts_event on webhook_attempts (event_id, attempted_at desc);
