-- login_sessions are the sessions the server can end: the console's
-- (cookie flowd_console), the built-in provider's single sign-on
-- (flowd_idp) and the consent pages' (flowd_consent). The cookie carries a
-- random session token; a session is live only while its row is, so
-- deleting the row ends it on every instance at its next request. Only the
-- SHA-256 of the token is stored. id is the session's public name, shown on
-- the sessions pages, in the CLI and the audit log, and carried as sid in
-- the provider's ID tokens; it admits nothing.
create table login_sessions (
    id                  uuid primary key default gen_random_uuid(),
    token_hash          bytea not null unique,
    kind                text not null check (kind in ('console', 'provider', 'consent')),
    issuer              text not null,
    subject             text not null,
    -- staff_id is the built-in staff account signed in, or null (an external
    -- issuer's staff, an end user).
    staff_id            uuid references staff_accounts (id) on delete cascade,
    -- organization_id is '' for consent sessions, which belong to no organization.
    organization_id     text not null default '',
    username            text not null default '' check (length(username) <= 320),
    -- provider_session_id: a console session's provider session, the one it
    -- was signed in through (the ID token's sid); they end together.
    provider_session_id uuid,
    user_agent          text not null default '' check (length(user_agent) <= 100),
    address             text not null default '' check (length(address) <= 64),
    created_at          timestamptz not null,
    last_seen_at        timestamptz not null,
    -- A session ends at the first of idle_until (moved on by use) and expires_at.
    idle_until          timestamptz not null,
    expires_at          timestamptz not null
);
create index login_sessions_owner_idx on login_sessions (issuer, subject);
create index login_sessions_staff_idx on login_sessions (staff_id) where staff_id is not null;
create index login_sessions_provider_idx on login_sessions (provider_session_id) where provider_session_id is not null;
create index login_sessions_organization_idx on login_sessions (organization_id) where kind <> 'consent';
-- The sweep deletes rows past either deadline.
create index login_sessions_idle_idx on login_sessions (idle_until);
create index login_sessions_expires_idx on login_sessions (expires_at);
