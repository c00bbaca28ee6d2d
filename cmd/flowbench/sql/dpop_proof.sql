-- dpop_proof: what a DPoP request adds (identity store SpendDPoPProof): its
-- proof's jti recorded for its key, a new jti every time.
insert into dpop_proofs (jkt, jti, expires_at) values ('flowbench-pgbench', md5(random()::text || clock_timestamp()::text), now() + interval '65 seconds')
	on conflict (jkt, jti) do nothing;
