-- Reserved for another branch of issue 20, whose migration takes this number;
-- the migrator wants every number up to the last. Drop this file when that
-- branch is merged.
select 1;
