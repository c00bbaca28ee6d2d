-- Failing endpoints: flowd disables an endpoint whose deliveries
-- have failed for FLOWD_WEBHOOK_DISABLE_AFTER without a success, and tells
-- the organization's other endpoints with an endpoint.disabled event. That
-- event is of no flow: events keep null for its flow and its sequence, which
-- number a flow's events. Its deliveries keep '' as their flow_id, as they
-- keep '' as their task_id, so that webhook_events stays not null.
alter table events alter column flow_id drop not null;
alter table events alter column sequence drop not null;

-- Every console page looks for the organization's endpoints flowd disabled,
-- to show a banner; there are none almost always.
create index webhook_endpoints_disabled on webhook_endpoints (organization_id, created_at)
    where disabled_reason is not null;
