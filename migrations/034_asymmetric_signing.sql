-- Asymmetric webhook signatures, thin events and test events.
--
-- Each organization gets an ed25519 key pair that signs the Standard
-- Webhooks v1a signature of the endpoints that ask for it. The private key
-- is stored as the symmetric secret is: "whsk_<base64>", or sealed under
-- FLOWD_KEY_ENCRYPTION_KEY. A rotation keeps the previous key signing until
-- previous_expires_at, as webhook_secrets does; key_id is the key's JWK
-- thumbprint, the kid its published JWKS names.
create table webhook_signing_keys (
    organization_id      text primary key,
    private_key          text not null,
    public_key           text not null,           -- whpk_<base64>
    key_id               text not null,
    created_at           timestamptz not null default now(),
    previous_private_key text,
    previous_public_key  text,
    previous_key_id      text,
    previous_expires_at  timestamptz
);

-- An endpoint chooses its signature (symmetric: v1, asymmetric: v1a) and
-- its body (full, or thin: ids and links only). signing_changed_at is when
-- its signing last changed: for a while after, both signatures are sent,
-- so that its receiver can move from one to the other without a gap.
--
-- A test event (one a person sent to try an endpoint) names no flow, goes
-- to that endpoint only, and no recovery sends it anywhere else.
--
-- On Citus these tables are distributed by now, and each change of one's
-- schema is executed on its own (see migration 031).
do $$
begin
    execute $sql$alter table webhook_endpoints
        add column signing text not null default 'symmetric' check (signing in ('symmetric', 'asymmetric')),
        add column payload text not null default 'full' check (payload in ('full', 'thin')),
        add column signing_changed_at timestamptz$sql$;
    execute 'alter table events add column test boolean not null default false';
    execute 'alter table webhook_events add column test boolean not null default false';
end
$$;
