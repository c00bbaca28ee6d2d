-- list deep page: what GET /api/flows?limit=10&starting_after=ID executes
-- on one PostgreSQL (flows store ListFlows with a cursor): one statement
-- that finds the cursor's position by primary key, walks the page index
-- from it, and reads the cursor's own row first, which says it is a flow
-- of the organization. It reads the columns a list shows (the flows
-- store's FlowSummary), in a round trip that first asks for generic plans,
-- as every shared read does. On Citus flowd runs list_deep_citus.sql. The
-- flows store's tests check that these are its statements.
\startpipeline
select set_config('plan_cache_mode', 'force_generic_plan', true);
select id, flow_number, reference_id, reference_name, consent_status, process_status, sandbox,
	flow_definition_id, pii_key_id, national_id_sealed, created_at, updated_at
	from flows
	where organization_id = :org and archived = false
	and (created_at, id) <= ((select created_at from flows where organization_id = :org and id = :cursor), :cursor)
	order by created_at desc, id desc limit 12;
\endpipeline
