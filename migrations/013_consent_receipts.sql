-- Consent receipts: every decision and withdrawal is a JWS that
-- flowd signs with a key of its own, kept published for as long as receipts
-- may be checked; the flow keeps its receipts as attachments.

-- A signing key signs tokens (access and ID tokens) or consent receipts.
-- One key of each purpose and algorithm signs at a time.
alter table signing_keys add column purpose text not null default 'token';
alter table signing_keys add constraint signing_keys_purpose_known check (purpose in ('token', 'receipt'));
drop index signing_keys_one_active_per_algorithm;
create unique index signing_keys_one_active on signing_keys (purpose, algorithm) where retired_at is null;

-- receipt_subject_salts keys each organization's hash of a person's national
-- id in its receipts: a reader of a receipt cannot test guesses against it,
-- the organization can, through flowd. Owned by the consent module.
create table receipt_subject_salts (
    organization_id text primary key,
    salt            bytea not null check (length(salt) = 32),
    created_at      timestamptz not null default now()
);

-- flow_attachments are a flow's documents: its consent receipts. They are
-- personal data and go with the flow.
create table flow_attachments (
    organization_id text not null,
    id              uuid not null,
    flow_id         uuid not null references flows (id) on delete cascade,
    kind            text not null check (kind in ('consent-receipt')),
    content_type    text not null,
    body            text not null,
    created_at      timestamptz not null default now(),
    primary key (organization_id, id)
);
create index flow_attachments_flow_idx on flow_attachments (flow_id, created_at, id);

alter table flows add column num_attachments integer not null default 0;
-- Who withdrew an acceptance: the person on the consent link, or the
-- organization through the API or console.
alter table flows add column withdrawn_by text check (withdrawn_by in ('individual', 'organization'));
update flows set withdrawn_by = 'organization' where withdrawn_at is not null;

-- The deletion log keeps the ids of the receipts it deleted, nothing else of them.
alter table flow_deletions add column receipt_ids uuid[] not null default '{}';
