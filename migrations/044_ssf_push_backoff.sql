-- A stream's push delivery is held by one job at a time: lease_job names
-- it, so that only it renews, lets go of or waits out the lease. After a
-- failed push the stream stays held until retry_at, the end of its
-- backoff, so that no job (not even one a new SET started) pushes it
-- sooner; enabling the stream again ends the backoff. On Citus
-- ssf_streams is distributed by now, so the change runs on its own, in the
-- DO block.
do $$
begin
    execute 'alter table ssf_streams add column lease_job bigint, add column retry_at timestamptz';
end
$$;
