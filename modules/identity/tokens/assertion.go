package tokens

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/clientjwks"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// Bounds of a client assertion (RFC 7523 3, OIDC Core 9).
const (
	// assertionLeeway is the clock skew allowed for iat and nbf.
	assertionLeeway  = 30 * time.Second
	maxAssertionSize = 16 << 10
	maxJTILength     = 256
)

// authFailure is a failed client authentication: Description is told to the
// client, reason (when set) only logged.
type authFailure struct {
	description string
	reason      string
}

func (f *authFailure) Error() string { return f.description }

func refuse(description string) *authFailure { return &authFailure{description: description} }

// assertionClientID returns the client id an assertion claims to be from
// (its sub, RFC 7523 3 B), read without verification, or "" when the
// assertion is not a JWT: only to pick the client whose keys then verify it.
func assertionClientID(raw string) string {
	if len(raw) > maxAssertionSize {
		return ""
	}
	tok, err := jwt.ParseSigned(raw, orgs.AssertionAlgorithms)
	if err != nil {
		return ""
	}
	var claims jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&claims); err != nil {
		return ""
	}
	return claims.Subject
}

// assertionAuth reads a client assertion's parameters into req: its
// method becomes AuthPrivateKeyJWT and its client id, when not given, the
// assertion's sub. An assertion beside a secret, or of another type, is an
// invalid_request; one that names no client or another client than
// client_id is refused (and counted) by the caller.
func assertionAuth(req ClientAuth) (ClientAuth, *authFailure, *TokenError) {
	if req.ClientAssertion == "" && req.ClientAssertionType == "" {
		return req, nil, nil
	}
	switch {
	case req.ClientSecret != "" || req.AuthMethod == identity.AuthSecretBasic:
		return req, nil, tokenErr(ErrCodeInvalidRequest, "Use one client authentication method: a client assertion, or a client secret (HTTP Basic or in the body), not both.")
	case req.ClientAssertionType != ClientAssertionType:
		return req, nil, tokenErr(ErrCodeInvalidRequest, "client_assertion_type must be "+ClientAssertionType+".")
	case req.ClientAssertion == "":
		return req, nil, tokenErr(ErrCodeInvalidRequest, "client_assertion is required with client_assertion_type.")
	}
	req.AuthMethod = identity.AuthPrivateKeyJWT
	claimed := assertionClientID(req.ClientAssertion)
	switch {
	case req.ClientID == "" && claimed == "":
		return req, refuse("client_assertion must be a JWT signed with RS256, PS256 or ES256, whose sub is the client_id."), nil
	case req.ClientID == "":
		req.ClientID = claimed
	case claimed != "" && claimed != req.ClientID:
		return req, refuse("client_id differs from the client assertion's sub."), nil
	}
	return req, nil, nil
}

// checkAssertion authenticates client c by a client assertion: signed by
// one of c's keys with an allowed algorithm, with the claims RFC 7523 3
// requires, and never seen before. Failures are *authFailure values; its
// jti is recorded only when everything else holds. A fetch of the client's
// jwks_uri goes through gate.
func (s *Service) checkAssertion(ctx context.Context, c orgs.StoredClient, raw string, gate *costGate) error {
	if len(raw) > maxAssertionSize {
		return refuse("client_assertion is too large.")
	}
	tok, err := jwt.ParseSigned(raw, orgs.AssertionAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return refuse("client_assertion must be a JWT signed with RS256, PS256 or ES256.")
	}
	claims, err := s.verifyAssertion(ctx, c, tok, gate)
	if err != nil {
		return err
	}
	if err := s.checkAssertionClaims(c.ID, claims); err != nil {
		return err
	}
	fresh, err := store.UseAssertionJTI(ctx, s.pool, c.ID, claims.ID, claims.Expiry.Time())
	if err != nil {
		return database.Classify(err)
	}
	if !fresh {
		return refuse("The client assertion was already used.")
	}
	return nil
}

// verifyAssertion checks the assertion's signature with the client's key
// of its kid, or without a kid with each of its keys of the algorithm's
// type. A kid the client's jwks_uri set lacks fetches the set again: the
// client may have rotated its keys. A fetch goes through gate, whose
// refusal is returned as it is.
func (s *Service) verifyAssertion(ctx context.Context, c orgs.StoredClient, tok *jwt.JSONWebToken, gate *costGate) (jwt.Claims, error) {
	if c.Keys.IsZero() {
		return jwt.Claims{}, refuse("The client has no registered keys; it authenticates with its secret.")
	}
	h := tok.Headers[0]
	set, err := s.clientKeySet(ctx, c, false, gate)
	if err != nil {
		return jwt.Claims{}, keysUnavailable(err)
	}
	candidates := matchingKeys(set, h)
	if len(candidates) == 0 && h.KeyID != "" && c.Keys.JWKSURI != "" {
		if set, err = s.clientKeySet(ctx, c, true, gate); err != nil {
			return jwt.Claims{}, keysUnavailable(err)
		}
		candidates = matchingKeys(set, h)
	}
	if len(candidates) == 0 {
		return jwt.Claims{}, refuse("No key of the client matches the assertion's kid and alg.")
	}
	for _, k := range candidates {
		var claims jwt.Claims
		if err := tok.Claims(k.Key, &claims); err == nil {
			return claims, nil
		}
	}
	return jwt.Claims{}, refuse("The client assertion's signature does not verify with the client's keys.")
}

// keysUnavailable is the failure of an assertion whose client's keys could
// not be had; the gate's slow_down stays what it is.
func keysUnavailable(err error) error {
	var te *TokenError
	if errors.As(err, &te) {
		return te
	}
	return &authFailure{description: "The client's keys could not be obtained.", reason: err.Error()}
}

// matchingKeys returns the keys of set that may have signed a JWS of
// header h: the key of its kid, else those of its algorithm's key type.
func matchingKeys(set []jose.JSONWebKey, h jose.Header) []jose.JSONWebKey {
	wantRSA := h.Algorithm != string(jose.ES256)
	return slices.DeleteFunc(slices.Clone(set), func(k jose.JSONWebKey) bool {
		if h.KeyID != "" && k.KeyID != h.KeyID {
			return true
		}
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			return true
		}
		_, isRSA := k.Key.(*rsa.PublicKey)
		return isRSA != wantRSA
	})
}

// checkAssertionClaims checks a verified assertion's claims (RFC 7523 3):
// iss and sub are the client, aud names this provider, it is within its
// lifetime of at most MaxAssertionLifetime, and it has a jti.
func (s *Service) checkAssertionClaims(clientID string, cl jwt.Claims) error {
	now := s.now()
	switch {
	case cl.Issuer != clientID || cl.Subject != clientID:
		return refuse("The assertion's iss and sub must both be the client_id.")
	case !slices.Contains(cl.Audience, s.cfg.Issuer) && !slices.Contains(cl.Audience, s.cfg.Issuer+"/oauth/token"):
		return refuse("The assertion's aud must be the issuer or the token endpoint URL.")
	case cl.Expiry == nil:
		return refuse("The assertion must have exp.")
	case !now.Before(cl.Expiry.Time()):
		return refuse("The assertion has expired.")
	case cl.IssuedAt != nil && cl.IssuedAt.Time().After(now.Add(assertionLeeway)):
		return refuse("The assertion's iat is in the future.")
	case cl.NotBefore != nil && cl.NotBefore.Time().After(now.Add(assertionLeeway)):
		return refuse("The assertion is not valid yet (nbf).")
	case cl.ID == "":
		return refuse("The assertion must have a jti.")
	case len(cl.ID) > maxJTILength:
		return refuse(fmt.Sprintf("The assertion's jti must be at most %d characters.", maxJTILength))
	}
	start := now
	if cl.IssuedAt != nil {
		start = cl.IssuedAt.Time()
	}
	if cl.Expiry.Time().Sub(start) > MaxAssertionLifetime {
		return refuse("The assertion's lifetime (exp - iat) must be at most 5 minutes.")
	}
	return nil
}

// clientKeySet returns the keys of a client: its inline set, or the set at
// its jwks_uri, fetched when not cached or when force is set (a kid the
// cached set lacks) and the cached set may be refetched. A fetch must first
// pass gate; a failure is returned as an error whose text names the reason,
// for the logs.
func (s *Service) clientKeySet(ctx context.Context, c orgs.StoredClient, force bool, gate *costGate) ([]jose.JSONWebKey, error) {
	keys := c.Keys
	if len(keys.JWKS) > 0 {
		return orgs.ParseJWKS(keys.JWKS)
	}
	if keys.JWKSURI == "" {
		return nil, errors.New("the client has no keys")
	}
	now := s.now()
	if set, ok := s.jwks.Get(c.ID, keys.JWKSURI, force, now); ok {
		return set, nil
	}
	if err := gate.enter(); err != nil {
		return nil, err
	}
	set, err := clientjwks.Fetch(ctx, s.cfg.JWKSHTTPClient, keys.JWKSURI, s.cfg.ClientJWKSHosts)
	if err != nil {
		return nil, err
	}
	s.jwks.Put(c.ID, keys.JWKSURI, set, now)
	return set, nil
}

// forgetClientKeys drops a client's fetched key set: its keys were
// replaced, or it changed otherwise (changes.TopicClient).
func (s *Service) forgetClientKeys(clientID string) { s.jwks.Forget(clientID) }
