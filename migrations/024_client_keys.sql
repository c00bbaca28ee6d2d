-- Placeholder: migration 024 belongs to the private_key_jwt branch (pkjwt),
-- which adds this file with its real content. It is here only so that the
-- migrations of the dpop branch are numbered without a gap; on merging,
-- take pkjwt's file.
select 1;
