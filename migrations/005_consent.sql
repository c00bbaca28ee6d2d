-- The consent module's requests: one per flow, reached by an unguessable link
-- token. The token is kept sealed (internal/pii) so that the API can show the
-- link again, and as a SHA-256 digest for the lookup when the link is opened.
create table consent_requests (
    flow_id         uuid primary key,
    organization_id text not null,
    token_hash      bytea not null,
    pii_key_id      text not null,
    token_sealed    bytea not null,
    created_at      timestamptz not null default now(),
    constraint consent_requests_token_key unique (token_hash)
);
