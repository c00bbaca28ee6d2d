-- revoked_access_tokens holds the jti of every access token its client
-- revoked (RFC 7009) until the token expires: bearer verification refuses
-- them on every instance. Rows are deleted by the identity module's sweep
-- once their token has expired.
create table revoked_access_tokens (
    jti        text primary key,
    client_id  text not null references api_clients (id) on delete cascade,
    expires_at timestamptz not null,
    revoked_at timestamptz not null default now()
);
create index revoked_access_tokens_expires_idx on revoked_access_tokens (expires_at);
