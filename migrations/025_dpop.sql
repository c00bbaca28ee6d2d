-- DPoP (RFC 9449): sender-constrained access tokens.
--
-- api_clients.dpop_bound_access_tokens is RFC 9449 5.2's client metadata of
-- that name: such a client's token requests must carry a DPoP proof.
alter table api_clients add column dpop_bound_access_tokens boolean not null default false;

-- refresh_tokens.dpop_jkt is the JWK SHA-256 thumbprint of the key a refresh
-- token family was first issued to; every refresh of the family must prove
-- possession of that key. Null for families issued without DPoP.
alter table refresh_tokens add column dpop_jkt text;

-- dpop_proofs holds the jti of every DPoP proof accepted, per key, while the
-- proof could still be presented: a proof is accepted once across every
-- instance. Rows are deleted by the identity module's sweep once expired.
create table dpop_proofs (
    jkt        text not null,
    jti        text not null,
    expires_at timestamptz not null,
    primary key (jkt, jti)
);
create index dpop_proofs_expires_idx on dpop_proofs (expires_at);
