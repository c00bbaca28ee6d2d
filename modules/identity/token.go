package identity

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// accessClaims are the claims of a built-in access token (CONTRACT.md section 2).
type accessClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	ClientID  string `json:"client_id"`
	Audience  string `json:"aud"`
	Expiry    int64  `json:"exp"`
	IssuedAt  int64  `json:"iat"`
	NotBefore int64  `json:"nbf"`
	ID        string `json:"jti"`
	Scope     string `json:"scope"`
	OrgID     string `json:"org_id"`
	// Confirmation binds a DPoP token to its key (RFC 9449 6.1); nil for bearer tokens.
	Confirmation *confirmation `json:"cnf,omitempty"`
}

func tokenErr(code, format string) *TokenError { return &TokenError{Code: code, Description: format} }

// Token implements Provider.
func (m *Module) Token(ctx context.Context, req TokenRequest) (Token, error) {
	switch req.GrantType {
	case "":
		return Token{}, tokenErr(ErrCodeInvalidRequest, "grant_type is required.")
	case GrantClientCredentials, GrantRefreshToken:
	default:
		return Token{}, tokenErr(ErrCodeUnsupportedGrantType, "grant_type must be client_credentials or refresh_token.")
	}
	client, err := m.authenticateClient(ctx, req.ClientAuth)
	if err != nil {
		return Token{}, err
	}
	requested, err := parseScope(req.Scope)
	if err != nil {
		return Token{}, err
	}
	jkt, err := m.tokenDPoP(ctx, client, req.DPoP)
	if err != nil {
		return Token{}, err
	}
	var tok Token
	switch req.GrantType {
	case GrantClientCredentials:
		scopes := client.Scopes
		if requested != nil {
			if !subset(requested, client.Scopes) {
				return Token{}, tokenErr(ErrCodeInvalidScope, "The client may not have every requested scope.")
			}
			scopes = requested
		}
		tok, err = m.issue(ctx, client, scopes, jkt)
	case GrantRefreshToken:
		tok, err = m.refresh(ctx, client, req.RefreshToken, requested, jkt)
	}
	if err != nil {
		return Token{}, err
	}
	if err := store.TouchClient(ctx, m.pool, client.ID); err != nil {
		m.log.Warn("identity: recording a client's last use", "client_id", client.ID, "error", err)
	}
	return tok, nil
}

// authenticateClient checks the client's credentials, a secret or a client
// assertion (private_key_jwt). Failures are not counted per client, so that
// no one can lock a client out by failing in its name; only the costly
// checks (argon2id of a secret without a MAC, a fetch of the client's
// jwks_uri) are bounded, per source address, and answer slow_down (429)
// when their address has failed too often.
func (m *Module) authenticateClient(ctx context.Context, req ClientAuth) (store.Client, error) {
	req, refused, terr := assertionAuth(req)
	if terr != nil {
		return store.Client{}, terr
	}
	if refused == nil && (req.ClientID == "" || (req.ClientSecret == "" && req.AuthMethod != AuthPrivateKeyJWT)) {
		return store.Client{}, &TokenError{Code: ErrCodeInvalidClient, AuthMethod: req.AuthMethod,
			Description: "Client authentication is required: client_id and client_secret in the body, HTTP Basic, or a client assertion."}
	}
	gate := &costGate{limiter: m.limiter, key: addressKey(req.RemoteAddr)}
	c, err := m.checkClient(ctx, req, refused, gate)
	var f *authFailure
	gate.done(errors.As(err, &f))
	switch {
	case f != nil:
		m.log.InfoContext(ctx, "identity: client authentication failed", "client_id", loggableID(req.ClientID),
			"remote_addr", req.RemoteAddr, "method", req.AuthMethod, "reason", cmp.Or(f.reason, f.description))
		return store.Client{}, &TokenError{Code: ErrCodeInvalidClient, AuthMethod: req.AuthMethod, Description: f.description}
	case errors.As(err, &terr) && terr.Code == ErrCodeSlowDown:
		m.log.WarnContext(ctx, "identity: costly client authentication refused after repeated failures from the address",
			"client_id", loggableID(req.ClientID), "remote_addr", req.RemoteAddr, "method", req.AuthMethod, "retry_after", terr.RetryAfter.String())
	}
	return c, err
}

// checkClient finds the client and checks its credentials; a refusal is an
// *authFailure.
func (m *Module) checkClient(ctx context.Context, req ClientAuth, refused *authFailure, gate *costGate) (store.Client, error) {
	if refused != nil {
		return store.Client{}, refused
	}
	failed := refuse("Client authentication failed.")
	if len(req.ClientID) > 128 || len(req.ClientSecret) > 512 {
		return store.Client{}, failed
	}
	c, err := store.GetClient(ctx, m.pool, req.ClientID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Client{}, failed
	}
	if err != nil {
		return store.Client{}, database.Classify(err)
	}
	if c.RevokedAt != nil {
		return store.Client{}, failed
	}
	if req.AuthMethod == AuthPrivateKeyJWT {
		err = m.checkAssertion(ctx, c, req.ClientAssertion, gate)
	} else {
		err = m.checkSecret(ctx, c, req.ClientSecret, gate)
	}
	if err != nil {
		return store.Client{}, err
	}
	return c, nil
}

// loggableID shortens a client id as given for the logs, and hides it when
// it looks like a secret pasted into the wrong field.
func loggableID(id string) string {
	if strings.HasPrefix(id, "fcs_") || strings.HasPrefix(id, "frt_") {
		return "[a secret, not logged]"
	}
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// parseScope reads an RFC 6749 3.3 scope parameter: nil when absent.
func parseScope(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, sc := range strings.Split(s, " ") {
		if sc == "" {
			continue
		}
		if !slices.Contains(AllScopes, sc) {
			return nil, tokenErr(ErrCodeInvalidScope, "Unknown scope; known scopes are "+strings.Join(AllScopes, " ")+".")
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// issue signs an access token and stores the first refresh token of a new
// family, both bound to the DPoP key of thumbprint jkt unless it is empty.
func (m *Module) issue(ctx context.Context, c store.Client, scopes []string, jkt string) (Token, error) {
	rt, err := m.storeRefreshToken(ctx, m.pool, c.ID, scopes, "", jkt)
	if err != nil {
		return Token{}, err
	}
	return m.sign(ctx, c, scopes, rt, jkt)
}

func (m *Module) storeRefreshToken(ctx context.Context, q store.Querier, clientID string, scopes []string, family, jkt string) (string, error) {
	if family == "" {
		family = newUUID()
	}
	raw := secret.Random("frt_", 32)
	sum := sha256.Sum256([]byte(raw))
	err := store.InsertRefreshToken(ctx, q, store.RefreshToken{
		Hash: sum[:], FamilyID: family, ClientID: clientID, Scopes: ordered(scopes), ExpiresAt: m.now().Add(m.cfg.RefreshTTL),
		DPoPJKT: jkt,
	})
	if err != nil {
		return "", database.Classify(err)
	}
	return raw, nil
}

// sign makes the access token and the answer of the token endpoint: a DPoP
// token bound to the key of thumbprint jkt, a bearer token when it is empty.
func (m *Module) sign(ctx context.Context, c store.Client, scopes []string, refreshToken, jkt string) (Token, error) {
	key, err := m.activeKey(ctx, accessTokenAlgorithm)
	if err != nil {
		return Token{}, err
	}
	now := m.now()
	scope := strings.Join(ordered(scopes), " ")
	claims := accessClaims{
		Issuer: m.cfg.Issuer, Subject: c.ID, ClientID: c.ID, Audience: m.cfg.Audience,
		Expiry: now.Add(m.cfg.AccessTTL).Unix(), IssuedAt: now.Unix(), NotBefore: now.Unix(),
		ID: secret.Random("", 16), Scope: scope, OrgID: c.OrganizationID,
	}
	tokenType := "Bearer"
	if jkt != "" {
		claims.Confirmation, tokenType = &confirmation{JKT: jkt}, "DPoP"
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return Token{}, err
	}
	jws, err := key.access.Sign(payload)
	if err != nil {
		return Token{}, err
	}
	at, err := jws.CompactSerialize()
	if err != nil {
		return Token{}, err
	}
	return Token{
		AccessToken: at, ExpiresIn: int(m.cfg.AccessTTL / time.Second),
		RefreshToken: refreshToken, RefreshExpiresIn: int(m.cfg.RefreshTTL / time.Second),
		TokenType: tokenType, Scope: scope,
	}, nil
}

// refresh redeems a refresh token: it must be the client's, unused, unrevoked
// and unexpired; it is then used up and succeeded by a new one of the same
// family. A used token presented again means it was copied: the whole family
// is revoked, and that revocation is committed although the request fails.
// A family first issued with DPoP stays bound to that key: each refresh
// needs a proof of it (jkt). RFC 9449 5 requires this for public clients,
// whose refresh tokens nothing else binds; for flowd's confidential clients
// it is cheap defence in depth, as a stolen refresh token then needs both
// the client secret and the DPoP private key.
func (m *Module) refresh(ctx context.Context, c store.Client, raw string, requested []string, jkt string) (Token, error) {
	if raw == "" {
		return Token{}, tokenErr(ErrCodeInvalidRequest, "refresh_token is required.")
	}
	sum := sha256.Sum256([]byte(raw))
	var (
		fail   *TokenError
		scopes []string
		next   string
	)
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		t, err := store.LockRefreshToken(ctx, tx, sum[:])
		if errors.Is(err, store.ErrNotFound) {
			fail = tokenErr(ErrCodeInvalidGrant, "The refresh token is invalid, expired or revoked.")
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case t.ClientID != c.ID:
			// Another client holds this client's token: it leaked.
			fail = tokenErr(ErrCodeInvalidGrant, "The refresh token was not issued to this client.")
			m.log.Warn("identity: refresh token presented by another client; revoking its family", "client_id", c.ID, "family", t.FamilyID)
			_, err := store.RevokeFamily(ctx, tx, t.FamilyID)
			return err
		case t.RevokedAt != nil:
			fail = tokenErr(ErrCodeInvalidGrant, "The refresh token is invalid, expired or revoked.")
			return nil
		case t.UsedAt != nil:
			fail = tokenErr(ErrCodeInvalidGrant, "The refresh token was already used; its family is revoked.")
			m.log.Warn("identity: refresh token reused; revoking its family", "client_id", c.ID, "family", t.FamilyID)
			_, err := store.RevokeFamily(ctx, tx, t.FamilyID)
			return err
		case !m.now().Before(t.ExpiresAt):
			fail = tokenErr(ErrCodeInvalidGrant, "The refresh token is invalid, expired or revoked.")
			return nil
		case t.DPoPJKT != "" && t.DPoPJKT != jkt:
			fail = tokenErr(ErrCodeInvalidGrant, "The refresh token is DPoP-bound: send a DPoP proof signed with the key it was issued to.")
			return nil
		}
		// The client may have lost scopes since the token was issued.
		scopes = intersect(t.Scopes, c.Scopes)
		if requested != nil {
			if !subset(requested, scopes) {
				fail = tokenErr(ErrCodeInvalidScope, "The requested scope exceeds the scope originally granted.")
				return nil
			}
			scopes = requested
		}
		if err := store.MarkRefreshTokenUsed(ctx, tx, sum[:]); err != nil {
			return err
		}
		next, err = m.storeRefreshToken(ctx, tx, c.ID, scopes, t.FamilyID, t.DPoPJKT)
		return err
	})
	if err != nil {
		return Token{}, database.Classify(err)
	}
	if fail != nil {
		return Token{}, fail
	}
	return m.sign(ctx, c, scopes, next, jkt)
}

func intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		if slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// ordered returns scopes in AllScopes order.
func ordered(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range AllScopes {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// clientAuthMethods are the client authentication methods of the token,
// revocation and introspection endpoints.
var clientAuthMethods = []string{AuthSecretBasic, AuthSecretPost, AuthPrivateKeyJWT}

// Discovery implements Provider.
func (m *Module) Discovery() map[string]any {
	return map[string]any{
		"issuer":                                m.cfg.Issuer,
		"token_endpoint":                        m.cfg.Issuer + "/oauth/token",
		"jwks_uri":                              m.cfg.Issuer + "/oauth/jwks",
		"grant_types_supported":                 []string{GrantClientCredentials, GrantRefreshToken},
		"token_endpoint_auth_methods_supported": clientAuthMethods,
		// private_key_jwt's algorithms, for the three endpoints alike.
		"token_endpoint_auth_signing_alg_values_supported":         algorithmNames(AssertionAlgorithms),
		"revocation_endpoint_auth_signing_alg_values_supported":    algorithmNames(AssertionAlgorithms),
		"introspection_endpoint_auth_signing_alg_values_supported": algorithmNames(AssertionAlgorithms),
		// RFC 8414 2: the revocation and introspection endpoints authenticate
		// clients as the token endpoint does.
		"revocation_endpoint":                           m.cfg.Issuer + "/oauth/revoke",
		"revocation_endpoint_auth_methods_supported":    clientAuthMethods,
		"introspection_endpoint":                        m.cfg.Issuer + "/oauth/introspect",
		"introspection_endpoint_auth_methods_supported": clientAuthMethods,
		"scopes_supported":                              AllScopes,
		// Without the interactive login there is no authorization endpoint,
		// so no response type; the login's document adds "code".
		"response_types_supported":              []string{},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": algorithmNames(IDTokenAlgorithms),
		// The claims of access tokens.
		"claims_supported":                  []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "client_id", "scope", "org_id", "cnf"},
		"dpop_signing_alg_values_supported": DPoPAlgorithmNames,
	}
}

func algorithmNames(algs []jose.SignatureAlgorithm) []string {
	out := make([]string, len(algs))
	for i, a := range algs {
		out[i] = string(a)
	}
	return out
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}
