-- A delivery to an organization endpoint names it, so that an event can be
-- redelivered to one endpoint. Null for the flow's own webhookUrl.
alter table webhook_events add column endpoint_id uuid;
create index webhook_events_endpoint on webhook_events (organization_id, endpoint_id, created_at) where endpoint_id is not null;
