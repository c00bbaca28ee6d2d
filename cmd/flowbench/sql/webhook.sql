-- webhook: what POST /api/flows with a webhookUrl executes: create.sql plus,
-- in the same transaction, the send-initiate-webhook task, River's job row
-- (River's JobInsertFastMany with one job; River throttles its wake-up
-- pg_notify per queue, so it is left out here) and the event row (flows
-- store InsertTask, webhooks PublishTx, webhooks store InsertEvent). The
-- delivery worker's own statements run beside these in flowd and are not
-- counted here: the figure is the database's limit for accepting events.
select id::text, name, organization_number, reference_prefix, redirect_origins, created_at from organizations where id = :org;
begin;
select flowd_next_flow_number(:org) as number, gen_random_uuid() as fid, gen_random_uuid() as tid, gen_random_uuid() as wtid, gen_random_uuid() as eid, sha256(gen_random_uuid()::text::bytea) as th \gset
insert into flows (id, organization_id, flow_number, reference_id, reference_name,
		sandbox, pii_key_id, national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, webhook_url,
		organization_number, process_instance_id, process_version, created_by, expires_at)
		values (:fid, :org, :number, 'PGB-' || :number, null, false, :keyid, :nisealed, :nihmac, :lnsealed, :redirect, :hookurl,
		'', gen_random_uuid(), '1', :client, now() + 2592000000000 * interval '1 microsecond')
		returning version, consent_status, process_status, created_at, updated_at, expires_at;
insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
		values (:fid, :org, :th, :keyid, :toksealed);
insert into flow_tasks (id, flow_id, task_type, task_category, status)
		values (:tid, :fid, 'consent', 'userTask', 'pending') returning created_at, updated_at;
insert into flow_tasks (id, flow_id, task_type, task_category, status)
		values (:wtid, :fid, 'send-initiate-webhook', 'serviceTask', 'pending') returning created_at, updated_at;
WITH raw_job_data AS (
    SELECT
        unnest(array[0]::bigint[]) AS id,
        unnest(array['{"event_id":"' || :eid || '"}']::jsonb[]) AS args,
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
insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, job_id)
		values (:eid, :org, :fid, :wtid, 'flow.created', :hookurl, '{"type":"flow.created"}', :job_id);
commit;
