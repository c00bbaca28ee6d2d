-- placeholder; replaced at merge
select 1;
