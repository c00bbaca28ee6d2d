-- list deep page: what GET /api/flows?limit=10&starting_after=ID executes
-- (flows store ListFlows with a cursor) when flowd knows where the cursor
-- stands, as it does for a cursor that ended a page it served, or that it
-- looked up once before: one statement, without a subquery, that walks the
-- page index from the cursor's position (cursor_at, its created_at) and
-- reads the cursor's own row first, which says it is still there. It reads
-- the columns a list shows (the flows store's FlowSummary), in a round trip
-- that first asks for generic plans, as every shared read does, except on
-- Citus (generic 0), which cannot plan the subject key's subquery
-- generically. The flows store's tests check that these are its statements.
\startpipeline
\if :generic
select set_config('plan_cache_mode', 'force_generic_plan', true);
\endif
select id, flow_number, reference_id, reference_name, consent_status, process_status, sandbox,
	flow_definition_id, pii_key_id, national_id_sealed, subject_key_id,
	(select k.key_sealed from subject_keys k where k.organization_id = :org and k.id = flows.subject_key_id) as subject_key_sealed, created_at, updated_at
	from flows
	where organization_id = :org and archived = false and (created_at, id) <= (:cursor_at, :cursor)
	order by created_at desc, id desc limit 12;
\endpipeline
