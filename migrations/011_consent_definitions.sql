-- The consent module's definitions: what an organization asks its
-- individuals to consent to. A published version is never changed: flows pin
-- one, and their decisions record the hash of its canonical text. Every
-- organization gets its default definition ("consent") on first use.
create table consent_definitions (
    organization_id text not null,
    id              text not null,
    is_default      boolean not null default false,
    latest_version  integer not null,
    created_at      timestamptz not null default now(),
    retired_at      timestamptz,
    primary key (organization_id, id)
);
create unique index consent_definitions_default_idx on consent_definitions (organization_id) where is_default;

create table consent_definition_versions (
    organization_id  text not null,
    definition_id    text not null,
    version          integer not null,
    tag              text,
    title_en         text not null,
    title_nb         text not null,
    purpose_en       text not null,
    purpose_nb       text not null,
    -- [{"en": …, "nb": …}, …]
    data_categories  jsonb not null default '[]',
    recipient        text not null,
    -- ISO 8601 duration; null lasts until withdrawn.
    validity         text,
    assurance_level  text not null check (assurance_level in ('low', 'substantial', 'high')),
    text_sha256      bytea not null,
    published_by     text not null,
    published_at     timestamptz not null default now(),
    primary key (organization_id, definition_id, version),
    foreign key (organization_id, definition_id) references consent_definitions
);

-- The flows module's side: the version each flow pins, and what its
-- decision recorded. Flows made before definitions ran the default's
-- version 1, whose text is what the consent page said then.
alter table flows
    add column flow_definition_id      text not null default 'consent',
    add column flow_definition_version integer not null default 1,
    add column version_tag             text,
    add column consent_text_sha256     bytea,
    add column consent_language        text,
    add column assurance_level         text,
    add column acr                     text,
    add column valid_until             timestamptz;
alter table flows
    alter column flow_definition_id drop default,
    alter column flow_definition_version drop default;
-- processVersion is the pinned version now; the old column said "1" for every flow.
alter table flows drop column process_version;
