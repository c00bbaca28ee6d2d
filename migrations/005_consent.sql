-- placeholder; replaced at merge
select 1; -- tern refuses a migration without SQL
