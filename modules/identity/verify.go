package identity

import (
	"context"
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
	"github.com/flowd/flowd/modules/identity/internal/store"
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

// VerifyAccessToken implements Service. A token verified before costs a
// SHA-256 and map lookups: its signature and claims are cached until it
// expires, and the revocation check reads a cache that other instances keep
// current through PostgreSQL notifications (or the database itself while
// notifications are not flowing).
func (m *Module) VerifyAccessToken(ctx context.Context, raw string) (Principal, error) {
	v, err := m.verifyToken(ctx, raw)
	if err != nil {
		return Principal{}, err
	}
	if v.jkt != "" {
		// RFC 9449 7.2: a DPoP-bound token is no bearer token.
		return Principal{}, errDPoPBoundAsBearer
	}
	if v.external {
		return m.admitExternal(ctx, v)
	}
	return m.admitBuiltin(ctx, v)
}

// verifyToken checks what a token proves by itself (signature, issuer,
// audience, expiry), through the token cache.
func (m *Module) verifyToken(ctx context.Context, raw string) (verifiedToken, error) {
	if raw == "" || len(raw) > maxTokenLen {
		return verifiedToken{}, ErrInvalidToken
	}
	now := m.now()
	v, sum, ok := m.tokens.get(raw, now)
	if ok {
		return v, nil
	}
	var err error
	switch iss := peekIssuer(raw); {
	case iss == m.cfg.Issuer:
		v, err = m.builtin.verify(ctx, raw)
	case m.external != nil && iss == m.external.issuer:
		v, err = m.external.verify(ctx, raw)
	default:
		err = ErrInvalidToken
	}
	if err != nil {
		return verifiedToken{}, err
	}
	m.tokens.put(sum, v, now)
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

// invalid logs why a token was refused (at debug: a client's mistake, not
// ours) and returns the one error callers see.
func (m *Module) invalid(ctx context.Context, reason string, err error) error {
	if unavailable(err) {
		return err
	}
	attrs := []any{"reason", reason}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	m.log.DebugContext(ctx, "identity: access token refused", attrs...)
	return ErrInvalidToken
}

// builtinVerifier verifies the built-in provider's tokens through go-oidc:
// issuer, audience, expiry and the ES256 signature by a published key. ID
// tokens, which RS256 signs by default, are not access tokens: their aud is
// a login client's id, never the API's audience.
type builtinVerifier struct {
	m *Module
	v *oidc.IDTokenVerifier
}

func newBuiltinVerifier(m *Module) *builtinVerifier {
	b := &builtinVerifier{m: m}
	b.v = oidc.NewVerifier(m.cfg.Issuer, keySet{m}, &oidc.Config{
		ClientID:             m.cfg.Audience,
		SupportedSigningAlgs: []string{string(accessTokenAlgorithm)},
		Now:                  m.now,
	})
	return b
}

// keySet is go-oidc's view of flowd's signing keys: it finds the key by the
// token's kid, refusing retired keys past their grace.
type keySet struct{ m *Module }

type keyErrKey struct{}

// VerifySignature implements oidc.KeySet.
func (k keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{accessTokenAlgorithm})
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("expected one signature")
	}
	pub, err := k.m.publicKey(ctx, jws.Signatures[0].Header.KeyID)
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
		return verifiedToken{}, b.m.invalid(ctx, "built-in token failed verification", err)
	}
	var c struct {
		ClientID string        `json:"client_id"`
		Scope    string        `json:"scope"`
		OrgID    string        `json:"org_id"`
		ID       string        `json:"jti"`
		Cnf      *confirmation `json:"cnf"`
	}
	if err := tok.Claims(&c); err != nil || c.ClientID == "" || c.ClientID != tok.Subject || c.OrgID == "" || c.ID == "" {
		return verifiedToken{}, b.m.invalid(ctx, "built-in token lacks client_id, sub, org_id or jti", err)
	}
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{accessTokenAlgorithm})
	if err != nil {
		return verifiedToken{}, b.m.invalid(ctx, "unparsable", err)
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
func (m *Module) admitBuiltin(ctx context.Context, v verifiedToken) (Principal, error) {
	if _, err := m.publicKey(ctx, v.keyID); err != nil {
		return Principal{}, m.invalid(ctx, "signing key no longer trusted", err)
	}
	st, err := m.clientState(ctx, v.clientID)
	if err != nil {
		return Principal{}, err
	}
	if st == nil || st.Revoked || st.OrganizationID != v.orgID {
		return Principal{}, m.invalid(ctx, "client unknown or revoked", nil)
	}
	revoked, err := m.accessTokenRevoked(ctx, v)
	if err != nil {
		return Principal{}, err
	}
	if revoked {
		return Principal{}, m.invalid(ctx, "token revoked", nil)
	}
	return Principal{OrganizationID: v.orgID, ClientID: v.clientID, Scopes: v.scopes, Sandbox: st.Sandbox, RateLimit: toRateLimit(st.RateLimit)}, nil
}

// accessTokenRevoked reports whether the token was revoked, from the revoked
// set while it is complete, else from the database.
func (m *Module) accessTokenRevoked(ctx context.Context, v verifiedToken) (bool, error) {
	if revoked, complete := m.revoked.has(v.jti); revoked || complete {
		return revoked, nil
	}
	revoked, err := store.AccessTokenRevoked(ctx, m.pool, v.jti)
	if err != nil {
		return false, database.Classify(err)
	}
	if revoked {
		m.revoked.add(v.jti, v.expiry, m.now())
	}
	return revoked, nil
}

// clientState returns a client's state, nil when there is no such client.
func (m *Module) clientState(ctx context.Context, clientID string) (*store.ClientState, error) {
	v, err := m.states.get("client:"+clientID, func() (any, bool, error) {
		st, err := store.GetClientState(ctx, m.pool, clientID)
		if errors.Is(err, store.ErrNotFound) {
			return (*store.ClientState)(nil), true, nil
		}
		if err != nil {
			return nil, false, database.Classify(err)
		}
		return &st, true, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*store.ClientState), nil
}

// knownScopes keeps flowd's scopes of a token's scopes.
func knownScopes(scopes []string) []string {
	var out []string
	for _, s := range AllScopes {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// externalVerifier verifies tokens of the configured external issuer through
// its discovery document and JWKS, fetched by go-oidc on first use and kept.
type externalVerifier struct {
	m      *Module
	issuer string

	mu        sync.Mutex
	v         *oidc.IDTokenVerifier
	failedAt  time.Time
	lastError error
}

func newExternalVerifier(m *Module) *externalVerifier {
	// The issuer is compared as configured: go-oidc requires the token's iss to
	// equal it exactly, trailing slash included (Auth0 has one).
	return &externalVerifier{m: m, issuer: m.cfg.ExternalIssuer}
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
	dctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), x.m.cfg.HTTPClient), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, x.m.cfg.ExternalIssuer)
	if err != nil {
		x.failedAt, x.lastError = time.Now(), err
		x.m.log.Error("identity: discovering the external issuer", "issuer", x.issuer, "error", err)
		return nil, apperr.Wrap(err, apperr.Unavailable, "The identity provider cannot be reached. Try again shortly.")
	}
	x.v = p.VerifierContext(oidc.ClientContext(context.Background(), x.m.cfg.HTTPClient), &oidc.Config{
		SkipClientIDCheck:    true, // audiences are checked in admitExternal, with the mapped client ids
		SupportedSigningAlgs: externalAlgorithms,
		Now:                  x.m.now,
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
		return verifiedToken{}, x.m.invalid(ctx, "external token failed verification", err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return verifiedToken{}, x.m.invalid(ctx, "external token claims", err)
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
	out.orgID = stringClaim(claims, x.m.cfg.OrgClaim)
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
func (m *Module) admitExternal(ctx context.Context, v verifiedToken) (Principal, error) {
	mapping, err := m.externalClient(ctx, v.clientID)
	if err != nil {
		return Principal{}, err
	}
	accepted := m.cfg.ExternalAudiences
	if len(accepted) == 0 {
		accepted = []string{m.cfg.Audience}
	}
	audOK := false
	for _, a := range v.audience {
		if slices.Contains(accepted, a) || (mapping != nil && a == mapping.ClientID) {
			audOK = true
			break
		}
	}
	if !audOK {
		return Principal{}, m.invalid(ctx, "external token for another audience", nil)
	}
	p := Principal{OrganizationID: v.orgID, ClientID: v.clientID, Scopes: v.scopes, External: true}
	if mapping != nil {
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
		p.RateLimit = toRateLimit(mapping.RateLimit)
	}
	if p.OrganizationID == "" {
		return Principal{}, m.invalid(ctx, "external token names no organization and its client is not mapped", nil)
	}
	exists, err := m.organizationExists(ctx, p.OrganizationID)
	if err != nil {
		return Principal{}, err
	}
	if !exists {
		return Principal{}, m.invalid(ctx, "external token names an unknown organization", nil)
	}
	return p, nil
}

// externalClient returns the mapping of a client of the external issuer, nil when unmapped.
func (m *Module) externalClient(ctx context.Context, clientID string) (*store.ExternalClient, error) {
	if clientID == "" {
		return nil, nil
	}
	issuer := strings.TrimRight(m.external.issuer, "/") // as MapExternalClient stores it
	// An unmapped client is cached too: MapExternalClient announces every new mapping.
	v, err := m.states.get("ext:"+issuer+"\x00"+clientID, func() (any, bool, error) {
		x, err := store.GetExternalClient(ctx, m.pool, issuer, clientID)
		if errors.Is(err, store.ErrNotFound) {
			return (*store.ExternalClient)(nil), true, nil
		}
		if err != nil {
			return nil, false, database.Classify(err)
		}
		return &x, true, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*store.ExternalClient), nil
}

func (m *Module) organizationExists(ctx context.Context, id string) (bool, error) {
	// Organizations are never deleted, so only their existence is cached: one
	// created later must not meet a cached "no".
	v, err := m.states.get("org:"+id, func() (any, bool, error) {
		_, err := store.GetOrganization(ctx, m.pool, id)
		if errors.Is(err, store.ErrNotFound) {
			return false, false, nil
		}
		if err != nil {
			return nil, false, database.Classify(err)
		}
		return true, true, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
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
