-- An API client may authenticate with a JWT signed by its own key
-- (private_key_jwt, RFC 7523 2.2) instead of, or besides, a secret. Its
-- public keys are registered inline (jwks) or at an https URL (jwks_uri) on
-- a host of FLOWD_CLIENT_JWKS_HOSTS. A client without a secret
-- (assertion-only) has a null secret_hash; one without any credential
-- cannot authenticate and is refused.
alter table api_clients alter column secret_hash drop not null;
alter table api_clients add column jwks jsonb;
alter table api_clients add column jwks_uri text;
alter table api_clients add column keys_replaced_at timestamptz;
alter table api_clients add constraint api_clients_one_key_source check (jwks is null or jwks_uri is null);
alter table api_clients add constraint api_clients_has_credential
    check (secret_hash is not null or jwks is not null or jwks_uri is not null);

-- client_assertion_jtis holds the jti of every client assertion accepted,
-- until the assertion expires: one assertion authenticates once, on any
-- instance. Rows are deleted by the identity module's sweep.
create table client_assertion_jtis (
    client_id  text not null references api_clients (id) on delete cascade,
    jti        text not null,
    expires_at timestamptz not null,
    primary key (client_id, jti)
);
create index client_assertion_jtis_expires_idx on client_assertion_jtis (expires_at);
