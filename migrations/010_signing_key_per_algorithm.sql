-- One key of each algorithm signs at a time: ES256 signs access tokens (and the
-- ID tokens of clients that ask for it), RS256 signs ID tokens by default.
-- Both rotate together and stay in the JWKS while their tokens may live.
drop index signing_keys_one_active;
create unique index signing_keys_one_active_per_algorithm on signing_keys (algorithm) where retired_at is null;
alter table signing_keys add constraint signing_keys_algorithm_known check (algorithm in ('ES256', 'RS256'));
