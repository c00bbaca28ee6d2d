-- A use's free text (its action and reference) may be about the person,
-- and must not outlive an erasure: it is sealed under the subject key of
-- the flow's person (action_sealed, reference_sealed), so that destroying
-- the key shreds it, in this database and in every backup of it. The text
-- columns keep what was recorded before, and the uses of flows not yet
-- under a subject key, until "flowd flows rekey" seals them.
--
-- On Citus flow_uses is distributed by now: each change of its schema runs
-- on its own, in the DO block.
do $$
begin
    execute 'alter table flow_uses alter column action drop not null,
        add column action_sealed bytea,
        add column reference_sealed bytea';
    execute 'create index flow_uses_plain_idx on flow_uses (organization_id, id) where action is not null';
end
$$;

-- flow.used events carried the use's action and reference, and events and
-- their deliveries outlive the flow. They carry neither from now on; those
-- stored before lose them too.
update events set body = ((body::jsonb #- '{data,use,action}') #- '{data,use,reference}')::text
where type = 'flow.used' and body::jsonb #> '{data,use}' ?| array['action', 'reference'];
-- The deliveries keep a copy of the body they send.
update webhook_events set body = ((body::jsonb #- '{data,use,action}') #- '{data,use,reference}')::text
where type = 'flow.used' and body::jsonb #> '{data,use}' ?| array['action', 'reference'];
