-- The use ledger: an organization records each use it makes of an accepted
-- consent, and the flow counts them. A flow also remembers when its
-- flow.expiring went out, so that the notice is sent once per acceptance
-- however many instances look for it.
--
-- On Citus flows is distributed by now, and a change of a distributed
-- table's schema runs on its shards with the text of the command that made
-- it: each such change is executed on its own, in the DO block below. The
-- new table is made local and distributed by database.Distribute, as every
-- tenant table is.
do $$
begin
    execute 'alter table flows add column num_uses integer not null default 0,
        add column last_used_at timestamptz,
        add column expiring_notified_at timestamptz';
    -- The expiring notice finds the acceptances that are due for it.
    execute 'create index flows_acceptances_to_notify on flows (valid_until)
        where consent_status = ''Accepted'' and valid_until is not null and expiring_notified_at is null';
end
$$;

create table flow_uses (
    organization_id text not null,
    id              uuid not null,
    flow_id         uuid not null,
    action          text not null,
    data_categories text[] not null default '{}',
    reference       text,
    used_at         timestamptz not null,
    recorded_at     timestamptz not null default now(),
    recorded_by     text not null,
    primary key (organization_id, id),
    foreign key (organization_id, flow_id) references flows (organization_id, id) on delete cascade
);
-- A flow's uses, latest first, page by (used_at, id).
create index flow_uses_flow_idx on flow_uses (organization_id, flow_id, used_at desc, id desc);
