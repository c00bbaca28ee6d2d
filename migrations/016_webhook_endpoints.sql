-- Organization webhook endpoints: besides a flow's own webhookUrl,
-- an organization registers endpoints that receive its flows' events, all of
-- them or the types it names. The organization id leads every key, since the
-- schema is to be distributed by organization (Citus). Organization ids are
-- the identity module's and are kept as plain text, without a foreign key.
create table webhook_endpoints (
    organization_id text not null,
    id              uuid not null,                -- UUID v7
    url             text not null,
    description     text not null default '',
    event_types     text[] not null default '{}', -- empty: every event type
    enabled         boolean not null default true,
    -- Why flowd disabled the endpoint (failing deliveries); null when it is
    -- enabled or a person disabled it.
    disabled_reason text,
    -- The first failed delivery since the last success; null while healthy.
    failing_since   timestamptz,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    primary key (organization_id, id)
);

-- Listing an organization's endpoints in the order they were made.
create index webhook_endpoints_by_created on webhook_endpoints (organization_id, created_at, id);
