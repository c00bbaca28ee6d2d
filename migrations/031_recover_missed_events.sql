-- Recovery of every event an endpoint missed, and of the flows' own webhook
-- URLs.
--
-- On Citus these tables are distributed by now, and Citus runs a change of
-- a distributed table's schema on its shards with the text of the command
-- that made it: a migration's file is one query string of many commands,
-- which a shard refuses. Each such change is therefore executed on its own,
-- in the DO blocks below.
--
-- A recovery of an endpoint now sends every event of its types since a time
-- that it has not received: those whose delivery to it failed, and those it
-- never had a delivery of, because it was disabled when they were published.
-- It pages through events and looks up each one's delivery to the endpoint,
-- which the index below finds; it replaces migration 018's index on the
-- endpoint's deliveries by creation, which served the recovery's paging and
-- serves nothing now. Being unique, it also holds each event to one delivery
-- per endpoint, so that a recovery, a redelivery and a retry that overlap
-- cannot make two. No column of it is updated by an attempt (migration 020).
--
-- A redelivery to one endpoint of an event whose delivery to it had been
-- cancelled (its flow deleted) could make a second one; the cancelled ones
-- give way, and among several left the oldest stays.
delete from webhook_events where (organization_id, id) in (
    select organization_id, id from (
        select organization_id, id, row_number() over (
            partition by organization_id, endpoint_id, event_id
            order by state = 'cancelled', created_at, id) as n
        from webhook_events where endpoint_id is not null) d
    where n > 1);
do $$
begin
    execute 'drop index webhook_events_endpoint';
    execute 'create unique index webhook_events_endpoint_event on webhook_events (organization_id, endpoint_id, event_id)
        where endpoint_id is not null';
end
$$;

-- An endpoint remembers when it was disabled, by a person or by flowd, so
-- that the console can offer to recover from then when it is enabled again;
-- null while it is enabled. Those disabled now were disabled by their last
-- change, as far as anything tells.
do $$
begin
    execute 'alter table webhook_endpoints add column disabled_at timestamptz';
end
$$;
update webhook_endpoints set disabled_at = updated_at where not enabled;

-- A recovery of no endpoint is one of the deliveries to the flows' own
-- webhook URLs that failed for good, of every host or of one (host, as an
-- incident names it: the URL's host and port). One such recovery of an
-- organization runs at a time, as one of each endpoint does.
do $$
begin
    execute $sql$alter table webhook_recoveries alter column endpoint_id drop not null,
        add column host text not null default ''$sql$;
    execute $sql$create unique index webhook_recoveries_flow_urls_active on webhook_recoveries (organization_id)
        where endpoint_id is null and state in ('queued', 'running')$sql$;
end
$$;
