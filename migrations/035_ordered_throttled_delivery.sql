-- Ordered and throttled delivery to webhook endpoints.
--
-- An endpoint may ask for its flows' events in order (ordering 'per-flow'):
-- a delivery to it is then held while a delivery of an earlier event of the
-- same flow to it is pending, and woken when that one ends. held marks a
-- delivery so put off, so that the end of its predecessor knows to wake it.
--
-- An endpoint may be throttled to rate_limit deliveries a second (null: no
-- limit). Each delivery to it takes the next free slot, throttle_next, and
-- waits for it; the delivery keeps its slot in throttle_slot until it is
-- sent. An attempt writes held and throttle_slot, and the throttle writes
-- throttle_next: none of them is in an index, so that those updates stay
-- HOT (migration 020).
--
-- On Citus these tables are distributed: each change of their schema is
-- executed on its own (see migration 031).
do $$
begin
    execute $sql$alter table webhook_endpoints
        add column ordering text not null default 'none' check (ordering in ('none', 'per-flow')),
        add column rate_limit integer check (rate_limit > 0),
        add column throttle_next timestamptz$sql$;
    execute $sql$alter table webhook_events
        add column held boolean not null default false,
        add column throttle_slot timestamptz$sql$;
end
$$;
