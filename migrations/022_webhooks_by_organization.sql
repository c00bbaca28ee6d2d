-- The webhooks module's tables keyed by organization, as 021
-- keyed the other tenant tables: a delivery's key leads with its
-- organization, an attempt carries its delivery's organization and
-- references it by both, and the indexes that led with a flow or a
-- delivery alone lead with the organization. So flowd migrate --citus
-- distributes them co-located with flows, and each statement of a delivery
-- is routed to the one node of its organization. events, webhook_secrets,
-- webhook_endpoints and webhook_recoveries were keyed so from the start, and
-- no foreign key joins them: events are pruned apart from their deliveries,
-- and a delivery or a recovery outlives its endpoint.

-- The attempts' key to their delivery goes first: it names the key that is replaced.
alter table webhook_attempts drop constraint webhook_attempts_event_id_fkey;

alter table webhook_events drop constraint webhook_events_pkey, add primary key (organization_id, id);
drop index webhook_events_flow;
create index webhook_events_flow on webhook_events (organization_id, flow_id, created_at desc);

-- An attempt is its delivery's organization's.
alter table webhook_attempts add column organization_id text;
update webhook_attempts a set organization_id = e.organization_id from webhook_events e where e.id = a.event_id;
alter table webhook_attempts alter column organization_id set not null,
    drop constraint webhook_attempts_pkey, add primary key (organization_id, id),
    add foreign key (organization_id, event_id) references webhook_events (organization_id, id) on delete cascade;
drop index webhook_attempts_event;
create index webhook_attempts_event on webhook_attempts (organization_id, event_id, attempted_at desc);

-- A delivery job now names its organization. The jobs queued before (also
-- finished ones, which a redelivery may run again) are given theirs here,
-- so that no delivery is looked up by its id alone and webhook_events needs
-- no index on it. River's tables come after flowd's migrations on a new
-- database, which has no job yet.
do $$
begin
    if to_regclass('river_job') is not null then
        update river_job j set args = j.args || jsonb_build_object('organization_id', e.organization_id)
        from webhook_events e
        where j.kind = 'flowd.webhook_delivery' and not j.args ? 'organization_id'
          and e.id = (j.args->>'event_id')::uuid;
    end if;
end
$$;

-- A delivery reports on its task by organization and id now (webhooks.TaskReporter).
drop index flow_tasks_id_idx;
