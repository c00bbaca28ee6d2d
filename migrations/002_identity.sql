-- placeholder; replaced at merge
-- (tern refuses a migration without SQL, hence the no-op below.)
select 1;
