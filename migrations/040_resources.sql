-- Data holders' resources: an organization registers the APIs it serves,
-- each named by an absolute URI, which a consent token names as its
-- audience. Another organization's consent definitions name them, so a
-- resource is found by its URI across organizations: the table stays on
-- the coordinator (database.CoordinatorTables), and a URI is registered
-- once.
create table resources (
    organization_id text not null,
    id              uuid not null,
    uri             text not null,
    name            text not null,
    created_by      text not null,
    created_at      timestamptz not null default now(),
    primary key (id)
);
create unique index resources_uri_idx on resources (uri);
create index resources_by_organization on resources (organization_id, created_at, id);

-- A definition version may name the resources its consent opens and the
-- parameters its text shows; a flow carries the parameters' values. On
-- Citus both tables are distributed by now, so each change runs on its
-- own, in the DO block.
do $$
begin
    execute 'alter table consent_definition_versions add column resources text[] not null default ''{}'',
        add column parameters jsonb not null default ''[]''';
    execute 'alter table flows add column parameters jsonb';
end
$$;
