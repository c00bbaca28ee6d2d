-- secret_mac lets a client secret be checked at the cost of an HMAC instead
-- of argon2id: HMAC-SHA-256 of the secret under a key derived from
-- FLOWD_KEY_ENCRYPTION_KEY, after a short tag of the secret_hash and key it
-- was made with, so that a secret changed without it (by an earlier version
-- of flowd) or a different key leaves it unused. Secrets are 256 random bits:
-- a fast keyed hash gives a copy of the database nothing to guess with,
-- while a wrong secret no longer costs flowd an argon2id. secret_hash stays,
-- for earlier versions of flowd and for rows without a MAC, which get one at
-- the client's next successful authentication.
alter table api_clients add column secret_mac bytea;
