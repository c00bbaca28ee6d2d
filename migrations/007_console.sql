-- The console: the audit log of what organization staff did. It is
-- the identity module's, since it records who acted; it never holds a secret
-- or a full national id, only what was done to which target.
-- organization_id is text like flows': staff of an external issuer carry
-- whatever organization claim their provider sends.
create table audit_log (
    id              bigint generated always as identity primary key,
    organization_id text not null,
    actor           text not null check (length(actor) between 1 and 320),
    action          text not null check (action ~ '^[a-z][a-z_.]{1,63}$'),
    target          text not null default '' check (length(target) <= 200),
    detail          text not null default '' check (length(detail) <= 500),
    at              timestamptz not null default now()
);
-- The audit page walks this index newest first from a cursor.
create index audit_log_page_idx on audit_log (organization_id, id desc);
