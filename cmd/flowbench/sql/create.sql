-- create: what POST /api/flows executes (no Idempotency-Key, no webhookUrl).
-- Organization settings (identity store GetOrganization), then one
-- transaction: flow number, flow, consent request, consent task (flows store
-- NextFlowNumber, InsertFlow, InsertTask; consent requests Insert). The token
-- is verified from memory (identity's caches), so it costs no statement.
-- pgbench cannot carry a generated uuid between statements without a round
-- trip of its own, so the first statement of the transaction also draws it.
select id::text, name, organization_number, reference_prefix, redirect_origins, created_at from organizations where id = :org;
begin;
select flowd_next_flow_number(:org) as number, gen_random_uuid() as fid, gen_random_uuid() as tid, sha256(gen_random_uuid()::text::bytea) as th \gset
insert into flows (id, organization_id, flow_number, reference_id, reference_name,
		sandbox, pii_key_id, national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, webhook_url,
		organization_number, process_instance_id, process_version, created_by, expires_at)
		values (:fid, :org, :number, 'PGB-' || :number, null, false, :keyid, :nisealed, :nihmac, :lnsealed, :redirect, '',
		'', gen_random_uuid(), '1', :client, now() + 2592000000000 * interval '1 microsecond')
		returning version, consent_status, process_status, created_at, updated_at, expires_at;
insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
		values (:fid, :org, :th, :keyid, :toksealed);
insert into flow_tasks (id, flow_id, task_type, task_category, status)
		values (:tid, :fid, 'consent', 'userTask', 'pending') returning created_at, updated_at;
commit;
