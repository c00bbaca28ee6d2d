-- Flow creation keeps the answers to its Idempotency-Keys in
-- api_idempotency_keys, as every other POST does, and the flows module's
-- flow_idempotency_keys is no longer read or written. It stays until a later
-- release drops it: migrations only add, so that the instances of the
-- earlier version, serving while this one rolls out or after a rollback,
-- find the table they write. A key kept there must still replay until it
-- expires (24 hours after its create), but SQL cannot write its row as flowd
-- now writes one: the row's request hash is the flows module's keyed hash of
-- the create's fields (not of the request, and the request is not kept), and
-- its answer is the consent link alone, sealed under the data key and bound
-- to the flow, which only flowd can open. So each unexpired key whose create
-- committed is carried over as it is: its request hash, data key and sealed
-- link unchanged, the answer's status and headers written out, and carried
-- naming the flow and its reference. flowd reads such a row with the
-- create's own comparison and makes its body from the link
-- (internal/idempotency/carried.go); nothing writes one any more, and it is
-- purged when it expires like any other. flow_id stays null, as on every
-- create's answer: that answer holds nothing personal and replays after its
-- flow is deleted, as it did. Expired answers go first, so that none holds
-- a key a carried one needs. On Citus both tables are distributed by
-- organization and co-located, so the copy runs on each shard; each change
-- runs on its own, in the DO block.
do $$
begin
    execute 'alter table api_idempotency_keys add column carried jsonb';
    execute 'delete from api_idempotency_keys where expires_at <= now()';
    execute $sql$
        insert into api_idempotency_keys (organization_id, key, request_hash, method, path, status, header,
            pii_key_id, body_sealed, created_at, expires_at, carried)
        select organization_id, key, request_hash, 'POST', '/api/flows', 201,
            jsonb_build_object('Content-Type', jsonb_build_array('application/json'),
                'Location', jsonb_build_array('/api/flows/' || flow_id::text)),
            pii_key_id, consent_sealed, created_at, expires_at,
            jsonb_build_object('flowId', flow_id::text, 'referenceId', reference_id)
        from flow_idempotency_keys where expires_at > now() and consent_sealed is not null
        on conflict (organization_id, key) do nothing
    $sql$;
end
$$;
