-- api_idempotency_keys keeps, for 24 hours, the answer to each API request
-- that carried an Idempotency-Key (every POST under /api but flow creation,
-- whose keys are in flow_idempotency_keys): a retry with the same key and
-- the same request gets the same answer, with another request a 422. A row
-- is written in the transaction of the change it answers, so the two commit
-- together. request_hash is a keyed hash of the client, method, path, query
-- and body (a body may hold a national id); body_sealed is the answer's body
-- sealed under the data key pii_key_id, bound to the row. flow_id names the
-- flow the answer shows, if any: deleting the flow deletes its answers.
create table api_idempotency_keys (
    organization_id text not null,
    key             text not null,
    request_hash    bytea not null,
    method          text not null,
    path            text not null,
    flow_id         uuid,
    status          smallint not null,
    header          jsonb not null,
    pii_key_id      text not null,
    body_sealed     bytea not null,
    created_at      timestamptz not null default now(),
    expires_at      timestamptz not null,
    primary key (organization_id, key)
);
create index api_idempotency_keys_expiry_idx on api_idempotency_keys (expires_at);
create index api_idempotency_keys_flow_idx on api_idempotency_keys (organization_id, flow_id) where flow_id is not null;
