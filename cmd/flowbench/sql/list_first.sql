-- list first page: what GET /api/flows?limit=10 executes (flows store
-- ListFlows without a cursor): 11 rows, to know whether more follow. It
-- reads the columns a list shows (the flows store's FlowSummary), in a
-- round trip that first asks for generic plans, as every shared read does
-- (flows store SharedReads), except on Citus (generic 0), which cannot
-- plan the subject key's subquery generically. The flows store's tests
-- check that these are its statements.
\startpipeline
\if :generic
select set_config('plan_cache_mode', 'force_generic_plan', true);
\endif
select id, flow_number, reference_id, reference_name, consent_status, process_status, sandbox,
	flow_definition_id, pii_key_id, national_id_sealed, subject_key_id,
	(select k.key_sealed from subject_keys k where k.organization_id = :org and k.id = flows.subject_key_id) as subject_key_sealed, created_at, updated_at
	from flows
	where organization_id = :org and archived = false
	order by created_at desc, id desc limit 11;
\endpipeline
