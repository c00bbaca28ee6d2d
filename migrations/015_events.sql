-- Events as a product: every change of a flow is an event, kept
-- for FLOWD_EVENT_RETENTION whether or not a webhook receives it, so that
-- clients may poll /api/events; webhook_events are now the deliveries of an
-- event to one destination each.

-- A flow numbers its events: a receiver orders them by data.sequence. The
-- flows module keeps the counter under the flow's row lock, so that it only
-- grows, also after old events are pruned.
alter table flows add column event_sequence integer not null default 0;

-- events is owned by the webhooks module.
create table events (
    organization_id text not null,
    id              uuid not null,     -- the webhook-id of every delivery of it
    flow_id         text not null,
    sequence        integer not null,
    type            text not null,
    body            text not null,     -- the JSON every delivery signs and sends
    created_at      timestamptz not null default now(),
    primary key (organization_id, id)
);
create index events_page on events (organization_id, created_at desc, id desc);
create index events_flow on events (organization_id, flow_id, sequence);
-- Retention deletes by age: a BRIN index stays tiny and costs an insert
-- next to nothing, as events arrive in time order.
create index events_created on events using brin (created_at);

-- The events of the deliveries so far, numbered in order per flow.
insert into events (organization_id, id, flow_id, sequence, type, body, created_at)
select organization_id, id, flow_id, row_number() over (partition by flow_id order by created_at, id), type, body, created_at
from webhook_events;
update flows f set event_sequence = n.count
from (select flow_id, count(*) as count from webhook_events group by flow_id) n
where n.flow_id = f.id::text;

alter table webhook_events add column event_id uuid;
update webhook_events set event_id = id;
alter table webhook_events alter column event_id set not null;
create index webhook_events_event on webhook_events (organization_id, event_id);
