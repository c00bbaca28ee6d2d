-- list first page: what GET /api/flows?limit=10 executes (flows store
-- ListFlows without a cursor): 11 rows, to know whether more follow.
select id::text, organization_id, flow_number, reference_id, reference_name, version,
	consent_status, process_status, sandbox, pii_key_id, national_id_sealed, national_id_hmac,
	last_name_sealed, redirect_url, webhook_url, organization_number, process_instance_id::text,
	process_version, created_by, has_errors, created_at, updated_at, opened_at, decided_at, expires_at
	from flows where organization_id = :org and archived = false order by created_at desc, id desc limit 11;
