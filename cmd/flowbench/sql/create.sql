-- create: what POST /api/flows executes (no Idempotency-Key, no webhookUrl):
-- one transaction: the pin of the consent definition (consent definitions
-- Pin), the flow with its number and its consent task, sent as
-- one batch (flows store InsertNumberedFlow), then the consent request
-- (consent requests Insert), then its flow.created event with the look-up of
-- the organization's endpoints that want it (webhooks store InsertEvent,
-- without a delivery: the flow has no webhookUrl; the organization has no
-- endpoint). The organization's settings and the token's
-- verification come from identity's caches and cost no statement. pgbench
-- draws the ids as random numbers, flowd as UUIDv7 in Go. Its flows go to an
-- organization of their own (writeorg): see runPgbench.
\set f1 random(0, 4611686018427387903)
\set f2 random(0, 4611686018427387903)
\set t1 random(0, 4611686018427387903)
\set t2 random(0, 4611686018427387903)
\set k1 random(0, 4611686018427387903)
begin;
select d.organization_id, d.id, d.is_default, d.latest_version, d.created_at, d.retired_at, v.version, v.tag
	from consent_definitions d
	left join consent_definition_versions v on v.organization_id = d.organization_id and v.definition_id = d.id
		and v.version = coalesce(nullif(0, 0), d.latest_version)
	where d.organization_id = :writeorg and (d.id = '' or ('' = '' and d.is_default))
	for key share of d;
-- The flows store's tests check that the pipeline's statements are its own
-- (go test -update there writes them).
\startpipeline
insert into subject_keys (organization_id, id, subject, pii_key_id, key_sealed, national_id_sealed,
	person_index, person_index_key)
	select :writeorg, (lpad(to_hex(:k1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid,
	sha256(:f1::text::bytea), :keyid, :keysealed, :sknisealed, sha256(:k1::text::bytea),
	:pindexkey on conflict (organization_id, subject)
	where destroyed_at is null do nothing;
with n as (select flowd_next_flow_number(:writeorg) as v where exists ( select 1 from subject_keys where organization_id = :writeorg and id = (lpad(to_hex(:k1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid and key_sealed is not null for share))
	insert into flows (flow_number, reference_id, expires_at, event_sequence, id, organization_id,
	reference_name, consent_status, process_status, sandbox, pii_key_id, national_id_sealed, national_id_hmac,
	last_name_sealed, redirect_url, webhook_url, organization_number, process_instance_id, flow_definition_id,
	flow_definition_version, version_tag, parameters, created_by, subject_key_id)
	select n.v, 'PGB' || '-' || n.v, now() + 2592000000000 * interval '1 microsecond', 1,
	(lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid, :writeorg, 'flowbench',
	'Unopened', 'active', false, 'subject', :nisealed, :nihmac, :lnsealed, :redirect, '', '', gen_random_uuid(),
	'consent', 1, null, null, :client, (lpad(to_hex(:k1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16,
	'0'))::uuid
	from n
	returning flow_number, reference_id, version, created_at, updated_at, num_attachments, expires_at,
	expired_at, num_uses, last_used_at, expiring_notified_at, person_index, person_index_key;
insert into flow_tasks (organization_id, id, flow_id, task_type, task_category, status)
	select :writeorg, (lpad(to_hex(:t1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid,
	(lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid, 'consent', 'user-task',
	'pending'
	where exists (select 1 from flows where organization_id = :writeorg and id = (lpad(to_hex(:f1::bigint), 16,
	'0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid)
	returning created_at, updated_at;
\endpipeline
insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
	values ((lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid, :writeorg, sha256(:f1::text::bytea || :f2::text::bytea), :keyid, :toksealed);
with event as (
	insert into events (organization_id, id, flow_id, sequence, type, body)
	values (:writeorg, (lpad(to_hex(:t2::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid,
	nullif(lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'), ''), nullif(1, 0), 'flow.created',
	'{"type":"flow.created","timestamp":"2026-01-02T03:04:05.678Z","data":{"flowId":"' || (lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid || '","referenceId":"PGB-1","organizationId":"' || :writeorg || '","status":"Unopened","flowStatus":"active","version":1,"sequence":1,"flowDefinitionId":"consent"}}'))
select id::text, url from webhook_endpoints
	where organization_id = :writeorg and enabled and (cardinality(event_types) = 0 or 'flow.created' = any (event_types))
	order by created_at, id;
commit;
