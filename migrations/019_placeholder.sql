-- Placeholder on the citus branch: another helper's migration takes this number at merge.
select 1;
