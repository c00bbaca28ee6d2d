-- list deep page: what GET /api/flows?limit=10&starting_after=ID executes
-- (flows store ListFlows with a cursor): one statement that finds the
-- cursor's position by primary key and walks the page index from it.
select id::text, organization_id, flow_number, reference_id, reference_name, version,
	consent_status, process_status, sandbox, pii_key_id, national_id_sealed, national_id_hmac,
	last_name_sealed, redirect_url, webhook_url, organization_number, process_instance_id::text,
	process_version, created_by, has_errors, created_at, updated_at, opened_at, decided_at, expires_at
	from flows where organization_id = :org and archived = false
	and (created_at, id) < ((select created_at from flows where organization_id = :org and id = :cursor), :cursor)
	order by created_at desc, id desc limit 11;
