package tokens

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// Revoke implements Provider. flowd tells a token's kind by its form (a JWT
// of this issuer is an access token, anything else is looked up as a
// refresh token), so token_type_hint needs no check. Another client's token
// is left alone and answered like an unknown one: telling the two apart
// would let a client probe which tokens are valid (RFC 7009 2.1 leaves the
// answer to the server).
func (s *Service) Revoke(ctx context.Context, req ClientTokenRequest) error {
	c, err := s.authenticateClient(ctx, req.ClientAuth)
	if err != nil {
		return err
	}
	if req.Token == "" {
		return tokenErr(ErrCodeInvalidRequest, "token is required.")
	}
	if peekIssuer(req.Token) == s.cfg.Issuer {
		return s.revokeAccessToken(ctx, c, req.Token)
	}
	return s.revokeRefreshToken(ctx, c, req.Token)
}

// revokeAccessToken records the revocation of one of c's access tokens by
// its jti, announces it to every instance in the same transaction, and
// audits it.
func (s *Service) revokeAccessToken(ctx context.Context, c orgs.StoredClient, raw string) error {
	v, err := s.verifyToken(ctx, raw)
	if err != nil || v.external {
		return onlyUnavailable(err) // expired or invalid: nothing to revoke
	}
	if v.clientID != c.ID {
		s.log.InfoContext(ctx, "identity: a client asked to revoke another client's access token; ignored", "client_id", c.ID)
		return nil
	}
	var revoked bool
	err = database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		revoked, err = store.RevokeAccessToken(ctx, tx, v.jti, c.ID, v.expiry)
		if err != nil || !revoked {
			return err
		}
		if err := s.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: c.OrganizationID, Actor: "client:" + c.ID,
			Action: identity.AuditAccessTokenRevoke, Target: "jti " + v.jti,
			Detail: "refused until it expires at " + v.expiry.UTC().Format(time.RFC3339)}); err != nil {
			return err
		}
		return changes.Notify(ctx, tx, changes.TopicRevoked, v.jti+" "+strconv.FormatInt(v.expiry.Unix(), 10))
	})
	if err != nil {
		return database.Classify(err)
	}
	if revoked {
		s.revoked.Add(v.jti, v.expiry, s.now())
		s.log.InfoContext(ctx, "identity: access token revoked by its client", "client_id", c.ID, "jti", v.jti)
	}
	return nil
}

// revokeRefreshToken revokes the family of one of c's refresh tokens, used
// or not: the client ends the grant, not one token of it.
func (s *Service) revokeRefreshToken(ctx context.Context, c orgs.StoredClient, raw string) error {
	sum := sha256.Sum256([]byte(raw))
	var (
		family string
		n      int64
	)
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := store.LockRefreshToken(ctx, tx, sum[:])
		if errors.Is(err, database.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if t.ClientID != c.ID {
			s.log.InfoContext(ctx, "identity: a client asked to revoke another client's refresh token; ignored", "client_id", c.ID)
			return nil
		}
		family = t.FamilyID
		if n, err = store.RevokeFamily(ctx, tx, family); err != nil || n == 0 {
			return err
		}
		return s.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: c.OrganizationID, Actor: "client:" + c.ID,
			Action: identity.AuditRefreshTokenRevoke, Target: "family " + family,
			Detail: fmt.Sprintf("the client revoked the refresh token family (%d tokens)", n)})
	})
	if err != nil {
		return database.Classify(err)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "identity: refresh token family revoked by its client", "client_id", c.ID, "family", family, "tokens", n)
	}
	return nil
}

// Introspect implements Provider. A client introspects its own tokens only:
// another client's token, even of the same organization, is inactive to it,
// so that a leaked client secret does not turn into a way to read every
// token of the organization.
func (s *Service) Introspect(ctx context.Context, req ClientTokenRequest) (Introspection, error) {
	c, err := s.authenticateClient(ctx, req.ClientAuth)
	if err != nil {
		return Introspection{}, err
	}
	if req.Token == "" {
		return Introspection{}, tokenErr(ErrCodeInvalidRequest, "token is required.")
	}
	var out Introspection
	if peekIssuer(req.Token) == s.cfg.Issuer {
		out, err = s.introspectAccessToken(ctx, c, req.Token)
	} else {
		out, err = s.introspectRefreshToken(ctx, c, req.Token)
	}
	out.Requester = c.ID
	return out, err
}

// introspectAccessToken answers for an access token: active when it passes
// everything an API call checks and is c's.
func (s *Service) introspectAccessToken(ctx context.Context, c orgs.StoredClient, raw string) (Introspection, error) {
	v, err := s.verifyToken(ctx, raw)
	if err != nil || v.external || v.clientID != c.ID {
		return Introspection{}, onlyUnavailable(err)
	}
	if _, err := s.admitBuiltin(ctx, v); err != nil {
		return Introspection{}, onlyUnavailable(err)
	}
	// The signature is verified, so go-oidc has read this payload already.
	parts := strings.Split(raw, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Introspection{}, err
	}
	var claims accessClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Introspection{}, err
	}
	out := Introspection{
		Active: true, Scope: claims.Scope, ClientID: claims.ClientID, TokenType: "Bearer",
		Expiry: time.Unix(claims.Expiry, 0), IssuedAt: time.Unix(claims.IssuedAt, 0),
		Subject: claims.Subject, Audience: claims.Audience, Issuer: claims.Issuer, JWTID: claims.ID, OrganizationID: claims.OrgID,
	}
	if claims.NotBefore != 0 {
		out.NotBefore = time.Unix(claims.NotBefore, 0)
	}
	if jkt := claims.Confirmation.thumbprint(); jkt != "" {
		out.TokenType, out.DPoPJKT = "DPoP", jkt // RFC 9449 6.2
	}
	return out, nil
}

// introspectRefreshToken answers for a refresh token: active while it is
// c's, unused, unrevoked and unexpired, as the refresh grant would take it.
func (s *Service) introspectRefreshToken(ctx context.Context, c orgs.StoredClient, raw string) (Introspection, error) {
	sum := sha256.Sum256([]byte(raw))
	t, err := store.GetRefreshToken(ctx, s.pool, sum[:])
	if errors.Is(err, database.ErrNotFound) {
		return Introspection{}, nil
	}
	if err != nil {
		return Introspection{}, database.Classify(err)
	}
	if t.ClientID != c.ID || t.RevokedAt != nil || t.UsedAt != nil || !s.now().Before(t.ExpiresAt) {
		return Introspection{}, nil
	}
	return Introspection{
		Active: true, Scope: strings.Join(identity.OrderedScopes(intersect(t.Scopes, c.Scopes)), " "), ClientID: c.ID, TokenType: TokenTypeRefresh,
		Expiry: t.ExpiresAt, IssuedAt: t.CreatedAt, Subject: c.ID, Issuer: s.cfg.Issuer, OrganizationID: c.OrganizationID,
	}, nil
}

// unavailable reports whether err is the database being unreachable, which
// the caller must hear rather than an answer about the token.
func unavailable(err error) bool {
	e, ok := apperr.As(err)
	return ok && e.Code == apperr.Unavailable
}

// onlyUnavailable keeps an error the caller must hear and drops one that
// only says the token is not valid, which revocation and introspection
// answer as success.
func onlyUnavailable(err error) error {
	if unavailable(err) {
		return err
	}
	return nil
}
