-- retrieve: what GET /api/flows/{id} executes, outside a transaction. The flow is
-- one of the seeded organization's, drawn at random as the HTTP scenario does.
-- The flow, its incidents and its consent link go in one batch (flows store
-- SharedReads.GetFlowAndIncidents, with the consent module's query queued in it). flowd sends the
-- retrieves of concurrent requests in shared pipelines; this is one alone.
-- The round trip first asks for generic plans, as every shared read does,
-- except on Citus (generic 0), which cannot plan the flow's subquery
-- generically. The flows store's tests check that the first three are its
-- statements.
\set n random(1, :flows)
\startpipeline
\if :generic
select set_config('plan_cache_mode', 'force_generic_plan', true);
\endif
select id, organization_id, flow_number, reference_id, reference_name, version, consent_status,
	process_status, sandbox, pii_key_id, national_id_sealed, national_id_hmac, last_name_sealed, redirect_url,
	webhook_url, organization_number, process_instance_id, flow_definition_id, flow_definition_version,
	version_tag, parameters, consent_text_sha256, consent_language, assurance_level, acr, valid_until,
	created_by, has_errors, created_at, updated_at, opened_at, decided_at, withdrawn_at, withdrawn_by,
	num_attachments, expires_at, expired_at, num_uses, last_used_at, expiring_notified_at, person_index,
	person_index_key, subject_key_id,
	(select k.key_sealed from subject_keys k where k.organization_id = :org and k.id = flows.subject_key_id) as subject_key_sealed
	from flows
	where organization_id = :org and id = ('00000000-0000-7000-8000-' || lpad(to_hex(:n::bigint), 12, '0'))::uuid;
select organization_id, id, flow_id, task_id, task_type, message, opened_at
	from flow_incidents
	where organization_id = :org and flow_id = any(array[('00000000-0000-7000-8000-' || lpad(to_hex(:n::bigint),
	12, '0'))]::text[]::uuid[]) and resolved_at is null
	order by opened_at, id;
select flow_id::text, organization_id, token_hash, pii_key_id, token_sealed
	from consent_requests where organization_id = :org and flow_id = ('00000000-0000-7000-8000-' || lpad(to_hex(:n::bigint), 12, '0'))::uuid;
\endpipeline
