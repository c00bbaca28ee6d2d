package tokens

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// maxTokenLen bounds the bearer tokens flowd looks at.
const maxTokenLen = 16 << 10

// externalAlgorithms are the signature algorithms accepted from an external
// issuer: asymmetric only. "none" and HMAC are never accepted, so a token
// "signed" with a public key as an HMAC secret is refused before any key is used.
var externalAlgorithms = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
}

// VerifyAccessToken implements Verifier. A token verified before costs a
// SHA-256 and map lookups: its signature and claims are cached until it
// expires, and the revocation check reads a cache that other instances keep
// current through PostgreSQL notifications (or the database itself while
// notifications are not flowing).
func (s *Service) VerifyAccessToken(ctx context.Context, raw string) (identity.Principal, error) {
	v, err := s.verifyToken(ctx, raw)
	if err != nil {
		return identity.Principal{}, err
	}
	if v.jkt != "" {
		// RFC 9449 7.2: a DPoP-bound token is no bearer token.
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, errDPoPBoundAsBearer
	}
	if v.external {
		return s.admitExternal(ctx, v)
	}
	return s.admitBuiltin(ctx, v)
}

// verifyToken checks what a token proves by itself (signature, issuer,
// audience, expiry), through the token cache.
func (s *Service) verifyToken(ctx context.Context, raw string) (verifiedToken, error) {
	if raw == "" || len(raw) > maxTokenLen {
		s.refusals.WithLabelValues(string(refusedMalformed)).Inc()
		return verifiedToken{}, ErrInvalidToken
	}
	sum := sha256.Sum256([]byte(raw))
	if v, ok := s.tokens.Get(sum); ok {
		return v, nil
	}
	var (
		v   verifiedToken
		err error
	)
	switch iss := peekIssuer(raw); {
	case iss == "":
		s.refusals.WithLabelValues(string(refusedMalformed)).Inc()
		err = ErrInvalidToken
	case iss == s.cfg.Issuer:
		v, err = s.builtin.verify(ctx, raw)
	case s.external != nil && iss == s.external.issuer:
		v, err = s.external.verify(ctx, raw)
	default:
		s.refusals.WithLabelValues(string(refusedIssuer)).Inc()
		err = ErrInvalidToken
	}
	if err != nil {
		return verifiedToken{}, err
	}
	s.tokens.PutUntil(sum, v, v.expiry)
	return v, nil
}

// peekIssuer reads the iss claim of a JWT without verifying anything, only to
// choose the verifier that will.
func peekIssuer(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return ""
	}
	return c.Issuer
}

// invalid counts a token refused for why, logs the reason (at debug: a
// client's mistake, not ours) and returns the one error callers see.
func (s *Service) invalid(ctx context.Context, why refusal, reason string, err error) error {
	if unavailable(err) {
		return err
	}
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		why = refusedExpired
	}
	s.refusals.WithLabelValues(string(why)).Inc()
	attrs := []any{"reason", reason}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	s.log.DebugContext(ctx, "identity: access token refused", attrs...)
	return ErrInvalidToken
}

// builtinVerifier verifies the built-in provider's tokens through go-oidc:
// issuer, audience, expiry and the ES256 signature by a published key. ID
// tokens, which RS256 signs by default, are not access tokens: their aud is
// a login client's id, never the API's audience.
type builtinVerifier struct {
	s *Service
	v *oidc.IDTokenVerifier
}

func newBuiltinVerifier(s *Service) *builtinVerifier {
	b := &builtinVerifier{s: s}
	b.v = oidc.NewVerifier(s.cfg.Issuer, keySet{s.keys}, &oidc.Config{
		ClientID:             s.cfg.Audience,
		SupportedSigningAlgs: []string{string(keys.AccessTokenAlgorithm)},
		Now:                  s.now,
	})
	return b
}

// keySet is go-oidc's view of flowd's signing keys: it finds the key by the
// token's kid, refusing retired keys past their grace.
type keySet struct{ keys Keys }

type keyErrKey struct{}

// VerifySignature implements oidc.KeySet.
func (k keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{keys.AccessTokenAlgorithm})
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("expected one signature")
	}
	pub, err := k.keys.AccessTokenKey(ctx, jws.Signatures[0].Header.KeyID)
	if err != nil {
		// go-oidc flattens errors; keep a database failure for the caller.
		if e, ok := apperr.As(err); ok && e.Code == apperr.Unavailable {
			if holder, ok := ctx.Value(keyErrKey{}).(*error); ok {
				*holder = err
			}
		}
		return nil, err
	}
	return jws.Verify(pub)
}

func (b *builtinVerifier) verify(ctx context.Context, raw string) (verifiedToken, error) {
	var keyErr error
	tok, err := b.v.Verify(context.WithValue(ctx, keyErrKey{}, &keyErr), raw)
	if err != nil {
		if keyErr != nil {
			return verifiedToken{}, keyErr
		}
		return verifiedToken{}, b.s.invalid(ctx, refusedVerification, "built-in token failed verification", err)
	}
	var c struct {
		ClientID string        `json:"client_id"`
		Scope    string        `json:"scope"`
		OrgID    string        `json:"org_id"`
		ID       string        `json:"jti"`
		Cnf      *confirmation `json:"cnf"`
	}
	if err := tok.Claims(&c); err != nil || c.ClientID == "" || c.ClientID != tok.Subject || c.OrgID == "" || c.ID == "" {
		return verifiedToken{}, b.s.invalid(ctx, refusedClaims, "built-in token lacks client_id, sub, org_id or jti", err)
	}
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{keys.AccessTokenAlgorithm})
	if err != nil {
		return verifiedToken{}, b.s.invalid(ctx, refusedMalformed, "unparsable", err)
	}
	// Only flowd's own access tokens open its API: not a consent token,
	// whatever its audience.
	if typ, _ := jws.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string); typ != "at+jwt" {
		return verifiedToken{}, b.s.invalid(ctx, refusedClaims, "built-in token of typ "+typ+", not at+jwt", nil)
	}
	return verifiedToken{
		expiry:   tok.Expiry,
		keyID:    jws.Signatures[0].Header.KeyID,
		clientID: c.ClientID,
		orgID:    c.OrgID,
		jti:      c.ID,
		scopes:   knownScopes(strings.Fields(c.Scope)),
		jkt:      c.Cnf.thumbprint(),
	}, nil
}

// admitBuiltin checks what may have changed since the token was signed: its
// key's retirement, its client's revocation and its own.
func (s *Service) admitBuiltin(ctx context.Context, v verifiedToken) (identity.Principal, error) {
	if _, err := s.keys.AccessTokenKey(ctx, v.keyID); err != nil {
		return identity.Principal{}, s.invalid(ctx, refusedKeyUntrusted, "signing key no longer trusted", err)
	}
	st, found, err := s.clients.ClientState(ctx, v.clientID)
	if err != nil {
		return identity.Principal{}, err
	}
	if !found || st.Revoked || st.OrganizationID != v.orgID {
		return identity.Principal{}, s.invalid(ctx, refusedClient, "client unknown or revoked", nil)
	}
	revoked, err := s.accessTokenRevoked(ctx, v)
	if err != nil {
		return identity.Principal{}, err
	}
	if revoked {
		return identity.Principal{}, s.invalid(ctx, refusedRevoked, "token revoked", nil)
	}
	return identity.Principal{OrganizationID: v.orgID, ClientID: v.clientID, Scopes: v.scopes, Sandbox: st.Sandbox, RateLimit: st.RateLimit}, nil
}

// accessTokenRevoked reports whether the token was revoked, from the revoked
// set while it is complete, else from the database.
func (s *Service) accessTokenRevoked(ctx context.Context, v verifiedToken) (bool, error) {
	if revoked, complete := s.revoked.Has(v.jti); revoked || complete {
		return revoked, nil
	}
	revoked, err := store.AccessTokenRevoked(ctx, s.pool, v.jti)
	if err != nil {
		return false, database.Classify(err)
	}
	if revoked {
		s.revoked.Add(v.jti, v.expiry, s.now())
	}
	return revoked, nil
}

// knownScopes keeps flowd's scopes of a token's scopes.
func knownScopes(scopes []string) []string {
	var out []string
	for _, sc := range identity.AllScopes {
		if slices.Contains(scopes, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// externalVerifier verifies tokens of the configured external issuer through
// its discovery document and JWKS, fetched by go-oidc on first use and kept.
type externalVerifier struct {
	s      *Service
	issuer string
	// mapped is the issuer as its clients' mappings name it (without a
	// trailing slash, as orgs stores it).
	mapped string

	mu        sync.Mutex
	v         *oidc.IDTokenVerifier
	failedAt  time.Time
	lastError error
}

func newExternalVerifier(s *Service) *externalVerifier {
	// The issuer is compared as configured: go-oidc requires the token's iss to
	// equal it exactly, trailing slash included (Auth0 has one).
	return &externalVerifier{s: s, issuer: s.cfg.ExternalIssuer, mapped: strings.TrimRight(s.cfg.ExternalIssuer, "/")}
}

// verifier returns go-oidc's verifier for the issuer, discovering it on first
// use; a failed discovery is retried after ten seconds, not on every request.
func (x *externalVerifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.v != nil {
		return x.v, nil
	}
	if time.Since(x.failedAt) < 10*time.Second {
		return nil, apperr.Wrap(x.lastError, apperr.Unavailable, "The identity provider cannot be reached. Try again shortly.")
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), x.s.cfg.HTTPClient), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, x.s.cfg.ExternalIssuer)
	if err != nil {
		x.failedAt, x.lastError = time.Now(), err
		x.s.log.ErrorContext(ctx, "identity: discovering the external issuer", "issuer", x.issuer, "error", err)
		return nil, apperr.Wrap(err, apperr.Unavailable, "The identity provider cannot be reached. Try again shortly.")
	}
	x.v = p.VerifierContext(oidc.ClientContext(context.Background(), x.s.cfg.HTTPClient), &oidc.Config{
		SkipClientIDCheck:    true, // audiences are checked in admitExternal, with the mapped client ids
		SupportedSigningAlgs: externalAlgorithms,
		Now:                  x.s.now,
	})
	return x.v, nil
}

func (x *externalVerifier) verify(ctx context.Context, raw string) (verifiedToken, error) {
	v, err := x.verifier(ctx)
	if err != nil {
		return verifiedToken{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return verifiedToken{}, x.s.invalid(ctx, refusedVerification, "external token failed verification", err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return verifiedToken{}, x.s.invalid(ctx, refusedClaims, "external token claims", err)
	}
	out := verifiedToken{external: true, expiry: tok.Expiry, audience: tok.Audience}
	// The client id: client_id (RFC 9068), else azp (OIDC), else a single-valued aud (Dex and others).
	switch {
	case stringClaim(claims, "client_id") != "":
		out.clientID = stringClaim(claims, "client_id")
	case stringClaim(claims, "azp") != "":
		out.clientID = stringClaim(claims, "azp")
	case len(tok.Audience) == 1:
		out.clientID = tok.Audience[0]
	}
	out.orgID = stringClaim(claims, x.s.cfg.OrgClaim)
	if cnf, ok := claims["cnf"].(map[string]any); ok {
		// An external issuer's DPoP-bound token binds as the built-in one does.
		out.jkt = stringClaim(cnf, "jkt")
	}
	out.scopes = knownScopes(scopeClaim(claims))
	if out.clientID == "" {
		out.clientID = tok.Subject
	}
	return out, nil
}

// admitExternal decides on an external token with the current mappings: the
// audience must be accepted (configured, or the mapped client's own id), and
// the organization comes from the org claim or, failing that, the mapping.
func (s *Service) admitExternal(ctx context.Context, v verifiedToken) (identity.Principal, error) {
	var (
		mapping orgs.ExternalClient
		mapped  bool
	)
	if v.clientID != "" {
		var err error
		if mapping, mapped, err = s.clients.ExternalClient(ctx, s.external.mapped, v.clientID); err != nil {
			return identity.Principal{}, err
		}
	}
	accepted := s.cfg.ExternalAudiences
	if len(accepted) == 0 {
		accepted = []string{s.cfg.Audience}
	}
	audOK := false
	for _, a := range v.audience {
		if slices.Contains(accepted, a) || (mapped && a == mapping.ClientID) {
			audOK = true
			break
		}
	}
	if !audOK {
		return identity.Principal{}, s.invalid(ctx, refusedAudience, "external token for another audience", nil)
	}
	p := identity.Principal{OrganizationID: v.orgID, ClientID: v.clientID, Scopes: v.scopes, External: true}
	if mapped {
		if p.OrganizationID == "" {
			p.OrganizationID = mapping.OrganizationID
		}
		// A token with none of flowd's scopes (Keycloak's "openid profile", Dex's
		// none) gets the mapping's; one with some gets those the mapping allows.
		if len(v.scopes) > 0 {
			p.Scopes = intersect(p.Scopes, mapping.Scopes)
		} else {
			p.Scopes = mapping.Scopes
		}
		p.Sandbox = mapping.Sandbox
		p.RateLimit = mapping.RateLimit
	}
	if p.OrganizationID == "" {
		return identity.Principal{}, s.invalid(ctx, refusedOrganization, "external token names no organization and its client is not mapped", nil)
	}
	exists, err := s.clients.OrganizationExists(ctx, p.OrganizationID)
	if err != nil {
		return identity.Principal{}, err
	}
	if !exists {
		return identity.Principal{}, s.invalid(ctx, refusedOrganization, "external token names an unknown organization", nil)
	}
	return p, nil
}

func stringClaim(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return s
}

// scopeClaim reads scopes from scope (a space-separated string, RFC 9068) or
// scp (a string or an array, as Entra and Okta send).
func scopeClaim(claims map[string]any) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch scp := claims["scp"].(type) {
	case string:
		return strings.Fields(scp)
	case []any:
		var out []string
		for _, s := range scp {
			if str, ok := s.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}
