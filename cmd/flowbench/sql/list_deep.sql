-- list deep page: what GET /api/flows?limit=10&starting_after=ID executes
-- (flows store ListFlows with a cursor): one statement that finds the
-- cursor's position by primary key and walks the page index from it.
-- It reads the columns a list shows (store summaryColumns).
select id::text, organization_id, flow_number, reference_id, reference_name,
	consent_status, process_status, sandbox, flow_definition_id, pii_key_id, national_id_sealed, created_at, updated_at
	from flows where organization_id = :org and archived = false
	and (created_at, id) < ((select created_at from flows where organization_id = :org and id = :cursor), :cursor)
	order by created_at desc, flows.id desc limit 11;
