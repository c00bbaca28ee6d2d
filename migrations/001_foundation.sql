-- The foundation: extensions every module may use. Module tables come in
-- their own migrations.
create extension if not exists pgcrypto;
