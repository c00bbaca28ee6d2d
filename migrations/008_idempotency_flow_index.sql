-- Deleting a flow deletes the idempotency keys that created it (they hold a
-- keyed hash of its national id and its sealed link); this index lets that
-- delete find them without scanning the organization's recent keys.
create index flow_idempotency_keys_flow_idx on flow_idempotency_keys (flow_id);
