-- Interactive login: staff accounts, and the short-lived state of the
-- built-in provider's authorization code flow. Secrets are stored only as
-- hashes (argon2id for passwords, SHA-256 for random codes and tokens); the
-- claims of a code or token, which may hold a national id, are encrypted.

create table staff_accounts (
    id              uuid primary key default gen_random_uuid(),
    -- organization_id names an organization of the identity module;
    -- kept as text so that this table does not depend on that one's shape.
    organization_id text not null check (organization_id <> ''),
    username        text not null check (username <> ''),
    name            text not null default '',
    role            text not null check (role in ('viewer', 'admin')),
    password_hash   text not null,
    disabled        boolean not null default false,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    last_login_at   timestamptz
);
-- Usernames (often e-mail addresses) are unique without regard to case.
create unique index staff_accounts_username_key on staff_accounts (lower(username));
create index staff_accounts_organization_idx on staff_accounts (organization_id);

-- login_requests holds an authorization request while the person signs in.
-- browser_hash binds it to the browser that started it (login CSRF).
create table login_requests (
    id             text primary key,
    browser_hash   bytea not null,
    client_id      text not null,
    redirect_uri   text not null,
    scope          text not null,
    state          text not null,
    nonce          text not null,
    code_challenge text not null,
    method         text not null check (method in ('staff', 'test-eid')),
    created_at     timestamptz not null default now(),
    expires_at     timestamptz not null
);
create index login_requests_expires_idx on login_requests (expires_at);

-- login_codes are authorization codes: single use, 60 seconds.
create table login_codes (
    code_hash      bytea primary key,
    client_id      text not null,
    redirect_uri   text not null,
    code_challenge text not null,
    scope          text not null,
    claims         bytea not null, -- encrypted JSON
    created_at     timestamptz not null default now(),
    expires_at     timestamptz not null,
    used_at        timestamptz
);
create index login_codes_expires_idx on login_codes (expires_at);

-- login_access_tokens are the opaque access tokens for /oauth/userinfo,
-- revoked together when their code is presented a second time.
create table login_access_tokens (
    token_hash bytea primary key,
    code_hash  bytea not null references login_codes (code_hash) on delete cascade,
    client_id  text not null,
    claims     bytea not null, -- encrypted JSON
    expires_at timestamptz not null,
    revoked_at timestamptz
);
create index login_access_tokens_code_idx on login_access_tokens (code_hash);

-- login_attempts counts failed sign-ins per bucket (an account or an address)
-- in a fixed window; shared by every instance.
create table login_attempts (
    bucket            text primary key,
    failures          integer not null,
    window_started_at timestamptz not null,
    blocked_until     timestamptz
);
