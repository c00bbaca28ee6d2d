-- Every tenant table is keyed by organization: it carries
-- organization_id, its primary key and unique constraints lead with it, and
-- its foreign keys to other tenant tables include it. So each table can be
-- distributed by organization_id on Citus (flowd migrate --citus), its rows
-- co-located with their flow's, and every statement of a request that names
-- the organization is routed to one node. On plain PostgreSQL nothing else
-- changes. The webhooks module's tables come in a migration of their own.

-- The foreign keys to flows and flow_tasks go first: they name the keys
-- that are replaced.
alter table flow_incidents drop constraint flow_incidents_flow_id_fkey,
    drop constraint flow_incidents_task_id_fkey;
alter table flow_tasks drop constraint flow_tasks_flow_id_fkey;
alter table flow_attachments drop constraint flow_attachments_flow_id_fkey;

alter table flows drop constraint flows_pkey, add primary key (organization_id, id);

-- A task and an incident are their flow's organization's.
alter table flow_tasks add column organization_id text;
update flow_tasks t set organization_id = f.organization_id from flows f where f.id = t.flow_id;
alter table flow_tasks alter column organization_id set not null,
    drop constraint flow_tasks_pkey, add primary key (organization_id, id),
    add foreign key (organization_id, flow_id) references flows (organization_id, id) on delete cascade;
drop index flow_tasks_flow_idx;
create index flow_tasks_flow_idx on flow_tasks (organization_id, flow_id, created_at, id);
-- A webhook delivery reports on its task by the task's id alone
-- (webhooks.TaskReporter), until its job carries the organization.
create index flow_tasks_id_idx on flow_tasks (id);

alter table flow_incidents add column organization_id text;
update flow_incidents i set organization_id = f.organization_id from flows f where f.id = i.flow_id;
alter table flow_incidents alter column organization_id set not null,
    drop constraint flow_incidents_pkey, add primary key (organization_id, id),
    add foreign key (organization_id, flow_id) references flows (organization_id, id) on delete cascade,
    add foreign key (organization_id, task_id) references flow_tasks (organization_id, id) on delete cascade;
drop index flow_incidents_open_idx;
create unique index flow_incidents_open_idx on flow_incidents (organization_id, task_id) where resolved_at is null;
drop index flow_incidents_flow_idx;
create index flow_incidents_flow_idx on flow_incidents (organization_id, flow_id) where resolved_at is null;

alter table flow_attachments
    add foreign key (organization_id, flow_id) references flows (organization_id, id) on delete cascade;
drop index flow_attachments_flow_idx;
create index flow_attachments_flow_idx on flow_attachments (organization_id, flow_id, created_at, id);

drop index flow_idempotency_keys_flow_idx;
create index flow_idempotency_keys_flow_idx on flow_idempotency_keys (organization_id, flow_id);

alter table flow_deletions drop constraint flow_deletions_pkey, add primary key (organization_id, id);

-- A link made from now on names its organization, and is found by it and
-- its digest; a link made before is found by its digest alone.
alter table consent_requests drop constraint consent_requests_pkey, add primary key (organization_id, flow_id),
    drop constraint consent_requests_token_key,
    add constraint consent_requests_token_key unique (organization_id, token_hash);
create index consent_requests_token_idx on consent_requests (token_hash);

alter table audit_log drop constraint audit_log_pkey, add primary key (organization_id, id);
