-- Placeholder on the revoke branch only: the Citus branch owns 021_keys_by_organization.sql.
-- When merging, keep the Citus branch's file (this one only closes the gap
-- before 023, which the migrator does not allow).
select 1;
