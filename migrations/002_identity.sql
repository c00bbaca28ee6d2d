-- The identity module: organizations, their API clients, the built-in OAuth
-- 2.0 provider's signing keys and refresh tokens, and the mapping of an
-- external issuer's clients to organizations.

create table organizations (
    id                  uuid primary key default gen_random_uuid(),
    name                text not null check (length(name) between 1 and 200),
    organization_number text not null default '' check (length(organization_number) <= 64),
    reference_prefix    text not null check (reference_prefix ~ '^[A-Z0-9]{2,8}$'),
    -- redirect_origins lists the origins a flow's redirectUrl may point to; empty allows any.
    redirect_origins    text[] not null default '{}',
    created_at          timestamptz not null default now()
);

create table api_clients (
    id              text primary key,
    organization_id uuid not null references organizations (id) on delete cascade,
    name            text not null check (length(name) between 1 and 200),
    -- secret_hash is an argon2id PHC string; the secret itself is never stored.
    secret_hash     text not null,
    scopes          text[] not null,
    sandbox         boolean not null default false,
    created_at      timestamptz not null default now(),
    secret_rotated_at timestamptz,
    last_used_at    timestamptz,
    revoked_at      timestamptz
);
create index api_clients_organization_idx on api_clients (organization_id, created_at);

-- signing_keys holds the asymmetric keys that sign access tokens. The private
-- part is sealed with AES-256-GCM under FLOWD_KEY_ENCRYPTION_KEY. Exactly one
-- key signs (retired_at is null); a retired key stays in the JWKS until the
-- tokens it signed have expired.
create table signing_keys (
    id                 text primary key,
    algorithm          text not null,
    public_jwk         jsonb not null,
    private_key_sealed bytea not null,
    created_at         timestamptz not null default now(),
    retired_at         timestamptz
);
create unique index signing_keys_one_active on signing_keys ((true)) where retired_at is null;

-- refresh_tokens are stored as SHA-256 hashes of high-entropy random tokens.
-- Tokens rotate: each use marks the token used and issues its successor in
-- the same family; presenting a used token revokes the whole family.
create table refresh_tokens (
    token_hash bytea primary key,
    family_id  uuid not null,
    client_id  text not null references api_clients (id) on delete cascade,
    scopes     text[] not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    used_at    timestamptz,
    revoked_at timestamptz
);
create index refresh_tokens_family_idx on refresh_tokens (family_id);
create index refresh_tokens_expires_idx on refresh_tokens (expires_at);

-- external_clients maps a client of an external issuer (FLOWD_OIDC_ISSUER) to
-- an organization, for tokens that carry no organization claim.
create table external_clients (
    issuer          text not null,
    client_id       text not null,
    organization_id uuid not null references organizations (id) on delete cascade,
    scopes          text[] not null,
    sandbox         boolean not null default false,
    created_at      timestamptz not null default now(),
    primary key (issuer, client_id)
);
