-- token: what POST /oauth/token (client_credentials) executes (identity
-- store GetClient, InsertRefreshToken, TouchClient). The secret is checked
-- by its keyed HMAC (the first request stored it), and the signing key is
-- cached, so neither costs a statement.
select id, organization_id::text, name, secret_hash, secret_mac, scopes, sandbox, created_at, last_used_at, revoked_at from api_clients where id = :client;
insert into refresh_tokens (token_hash, family_id, client_id, scopes, expires_at)
	values (sha256(gen_random_uuid()::text::bytea), gen_random_uuid(), :client, :scopes, now() + interval '30 minutes');
update api_clients set last_used_at = now()
	where id = :client and (last_used_at is null or last_used_at < now() - interval '1 minute');
