-- Shared Signals (OpenID SSF 1.0): a data holder's streams, the subjects
-- it removed from them, and the Security Event Tokens each stream holds
-- until its receiver acknowledges them. All three are tenant tables of the
-- data holder's organization (database.TenantTables), co-located, so a
-- stream's SETs live on its node; a withdrawal in another organization
-- inserts into them in its own transaction, which Citus allows.
create table ssf_streams (
    organization_id      text not null,
    id                   uuid not null,
    aud                  text[] not null,
    description          text not null default '',
    delivery_method      text not null check (delivery_method in ('urn:ietf:rfc:8935', 'urn:ietf:rfc:8936')),
    endpoint_url         text not null default '',
    -- The push Authorization header, sealed under the data key
    -- (internal/pii) bound to the stream; key id empty when there is none.
    authorization_sealed bytea,
    authorization_key_id text not null default '',
    events_requested     text[] not null default '{}',
    events_delivered     text[] not null default '{}',
    status               text not null default 'enabled' check (status in ('enabled', 'paused', 'disabled')),
    status_reason        text not null default '',
    -- Push delivery: consecutive failed attempts, and who holds the
    -- stream's delivery until when (one worker at a time keeps its order).
    failures             int not null default 0,
    last_error           text not null default '',
    lease_until          timestamptz,
    created_by           text not null,
    created_at           timestamptz not null default now(),
    updated_at           timestamptz not null default now(),
    primary key (organization_id, id)
);

-- Subjects a receiver removed: their events are not put on the stream.
create table ssf_removed_subjects (
    organization_id text not null,
    stream_id       uuid not null,
    consent_id      text not null,
    removed_at      timestamptz not null default now(),
    primary key (organization_id, stream_id, consent_id),
    foreign key (organization_id, stream_id) references ssf_streams (organization_id, id) on delete cascade
);

-- A SET on a stream: pending until the receiver acknowledges it (push: its
-- 202; poll: ack) or rejects it (push: a 400 with an RFC 8935 error body;
-- poll: setErrs). jti is a UUIDv7, so (created_at, jti) is the stream's order.
create table ssf_sets (
    organization_id        text not null,
    stream_id              uuid not null,
    jti                    uuid not null,
    event_type             text not null,
    -- The consent (flow) and its organization, for the person's proof;
    -- empty for the stream's own events (verification, stream-updated).
    consent_id             text not null default '',
    source_organization_id text not null default '',
    jws                    text not null,
    state                  text not null default 'pending' check (state in ('pending', 'acknowledged', 'rejected')),
    attempts               int not null default 0,
    last_attempt_at        timestamptz,
    last_status            int,
    last_error             text not null default '',
    err                    text not null default '',
    err_description        text not null default '',
    settled_at             timestamptz,
    created_at             timestamptz not null default now(),
    primary key (organization_id, stream_id, jti),
    foreign key (organization_id, stream_id) references ssf_streams (organization_id, id) on delete cascade
);
create index ssf_sets_pending on ssf_sets (organization_id, stream_id, created_at, jti) where state = 'pending';
create index ssf_sets_by_consent on ssf_sets (consent_id) where consent_id <> '';

-- The push deliveries' River job queue has tables of its own (see
-- database.RiverSchemas): its leader knows only its job kinds.
create schema if not exists ssf_river;
