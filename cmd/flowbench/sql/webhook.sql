-- webhook: what POST /api/flows with a webhookUrl executes: create.sql plus,
-- in the same transaction and batch, the send-initiate-webhook task, then
-- River's job row (River's JobInsertFastMany with one job; River throttles
-- its wake-up pg_notify per queue, so it is left out here) and the event row
-- (webhooks PublishTx, webhooks store InsertEvent: the event, its delivery and
-- the look-up of endpoints, one statement). The delivery worker's own
-- statements run beside these in flowd and are not counted here: the figure
-- is the database's limit for accepting events.
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
	'Unopened', 'active', false, 'subject', :nisealed, :nihmac, :lnsealed, :redirect, :hookurl, '',
	gen_random_uuid(), 'consent', 1, null, null, :client, (lpad(to_hex(:k1::bigint), 16,
	'0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid
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
insert into flow_tasks (organization_id, id, flow_id, task_type, task_category, status)
	select :writeorg, (lpad(to_hex(:t2::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid,
	(lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid, 'send-initiate-webhook',
	'service-task', 'pending'
	where exists (select 1 from flows where organization_id = :writeorg and id = (lpad(to_hex(:f1::bigint), 16,
	'0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid)
	returning created_at, updated_at;
\endpipeline
insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
	values ((lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid, :writeorg, sha256(:f1::text::bytea || :f2::text::bytea), :keyid, :toksealed);
WITH raw_job_data AS (
    SELECT
        unnest(array[0]::bigint[]) AS id,
        unnest(array['{"event_id":"' || :f1 || '"}']::jsonb[]) AS args,
        unnest(array[:zerots]::timestamptz[]) AS created_at,
        unnest(array['pgbench.noop']::text[]) AS kind,
        unnest(array[8]::smallint[]) AS max_attempts,
        unnest(array['{}']::jsonb[]) AS metadata,
        unnest(array[1]::smallint[]) AS priority,
        unnest(array['pgbench']::text[]) AS queue,
        unnest(array[:zerots]::timestamptz[]) AS scheduled_at,
        unnest(array['available']::text[]) AS state,
        unnest(array['']::text[]) AS tags,
        unnest(array['']::bytea[]) AS unique_key,
        unnest(array[0]::integer[]) AS unique_states
)
INSERT INTO river_job(id, args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
SELECT coalesce(nullif(id, 0), nextval('river_job_id_seq'::regclass)), args,
    coalesce(nullif(created_at, :zerots), now()), kind, max_attempts, coalesce(metadata, '{}'::jsonb),
    priority, queue, coalesce(nullif(scheduled_at, :zerots), now()), state::river_job_state,
    string_to_array(tags, ',')::varchar(255)[], nullif(unique_key, '')::bytea, nullif(unique_states::integer, 0)::bit(8)
FROM raw_job_data
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND river_job_state_in_bitmask(unique_states, state)
DO UPDATE SET kind = river_job.kind
RETURNING *, (xmax != 0) AS unique_skipped_as_duplicate \gset job_
with event as (
	insert into events (organization_id, id, flow_id, sequence, type, body)
	values (:writeorg, (lpad(to_hex(:t2::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid,
	(lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0')), 1, 'flow.created', '{"type":"flow.created"}')),
delivery as (
	insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, job_id, event_id)
	values ((lpad(to_hex(:t2::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid, :writeorg, (lpad(to_hex(:f1::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0')), (lpad(to_hex(:t2::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0')), 'flow.created', :hookurl, '{"type":"flow.created"}', :job_id,
	(lpad(to_hex(:t2::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid))
select id::text, url from webhook_endpoints
	where organization_id = :writeorg and enabled and (cardinality(event_types) = 0 or 'flow.created' = any (event_types))
	order by created_at, id;
commit;
