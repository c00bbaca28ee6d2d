package tokens

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// ConsentTokens is the token service with consent tokens: its Token issues
// them, its Introspect answers data holders about them, and its Discovery
// says so. It is built after the flows and consent modules, which the
// token service itself comes before.
type ConsentTokens struct {
	*Service
	consents Consents
	ttl      time.Duration
}

var _ Provider = (*ConsentTokens)(nil)

// NewConsentTokens returns s issuing consent tokens of consents, each living
// ttl (DefaultConsentTokenTTL when 0) or less.
func NewConsentTokens(s *Service, consents Consents, ttl time.Duration) (*ConsentTokens, error) {
	if s == nil || consents == nil {
		return nil, errors.New("tokens: NewConsentTokens needs the token service and Consents")
	}
	if ttl <= 0 {
		ttl = DefaultConsentTokenTTL
	}
	return &ConsentTokens{Service: s, consents: consents, ttl: ttl}, nil
}

// Discovery implements Provider: the token service's metadata, with the
// authorization_details type (RFC 9396 10) and signed introspection (RFC
// 9701 7).
func (t *ConsentTokens) Discovery() map[string]any {
	doc := t.Service.Discovery()
	doc["authorization_details_types_supported"] = []string{ConsentDetailsType}
	doc["introspection_signing_alg_values_supported"] = []string{string(keys.AccessTokenAlgorithm)}
	return doc
}

// Token implements Provider: a request with authorization_details or a
// resource asks for a consent token, any other is the token service's.
func (t *ConsentTokens) Token(ctx context.Context, req TokenRequest) (Token, error) {
	if req.AuthorizationDetails == "" && req.Resource == "" {
		return t.Service.Token(ctx, req)
	}
	if req.GrantType != GrantClientCredentials {
		return Token{}, tokenErr(ErrCodeInvalidRequest, "authorization_details and resource are for grant_type=client_credentials.")
	}
	client, err := t.authenticateClient(ctx, req.ClientAuth)
	if err != nil {
		return Token{}, err
	}
	if req.AuthorizationDetails == "" {
		// RFC 8707 2: flowd's own access tokens name no resource.
		return Token{}, tokenErr(ErrCodeInvalidTarget, "A resource is only for consent tokens: send authorization_details too.")
	}
	if strings.TrimSpace(req.Scope) != "" {
		return Token{}, tokenErr(ErrCodeInvalidRequest, "A consent token has no scope: ask with authorization_details and resource alone.")
	}
	jkt, err := t.tokenDPoP(ctx, client, req.DPoP)
	if err != nil {
		return Token{}, err
	}
	tok, err := t.issueConsentToken(ctx, client, req.AuthorizationDetails, req.Resource, jkt)
	if err != nil {
		return Token{}, err
	}
	if err := t.clients.TouchClient(ctx, client.ID); err != nil {
		t.log.WarnContext(ctx, "identity: recording a client's last use", "client_id", client.ID, "error", err)
	}
	return tok, nil
}

// issueConsentToken checks the request against the consent as it is now,
// signs the token and records its use; each refusal is audited.
func (t *ConsentTokens) issueConsentToken(ctx context.Context, c orgs.StoredClient, details, resource, jkt string) (Token, error) {
	asked, problem := parseAuthorizationDetails(details)
	if problem != "" {
		return Token{}, t.refuse(ctx, c, "", resource, problem)
	}
	flowID := asked.ID
	if !slices.Contains(c.Scopes, identity.ScopeFlowsWrite) {
		// A token is a use of the consent, which only flows:write records.
		return Token{}, t.refuseAs(ctx, c, ErrCodeInvalidScope, flowID, resource, "Consent tokens need the scope "+identity.ScopeFlowsWrite+".")
	}
	if resource == "" {
		return Token{}, t.refuse(ctx, c, flowID, resource, "resource is required: the URI of a resource the consent names (RFC 8707).")
	}
	// The consent is read once: the token is checked and signed against
	// the read its use is then counted after, which a withdrawal since
	// refuses.
	jti := secret.Random("", 16)
	var tok Token
	err := t.consents.RecordTokenUse(ctx, ConsentUse{OrganizationID: c.OrganizationID, ClientID: c.ID, FlowID: flowID,
		Resource: resource, TokenID: jti}, func(con Consent) (err error) {
		tok, err = t.consentToken(ctx, c, con, resource, jkt, jti)
		return err
	}, func(ctx context.Context, tx database.Tx) error {
		return t.audit.RecordAuditTx(ctx, tx, refusalEntry(c, flowID, resource, "The flow's consent is no longer in force."))
	})
	switch {
	case errors.Is(err, ErrConsentNotInForce):
		return Token{}, tokenErr(ErrCodeInvalidAuthorizationDetails, "The flow's consent is no longer in force.")
	case errors.Is(err, ErrNoConsent):
		return Token{}, t.refuse(ctx, c, flowID, resource, "The organization has no flow with this id.")
	case err != nil:
		return Token{}, err
	}
	return tok, nil
}

// consentToken checks a request of c for a token of con addressed to
// resource, each refusal audited, and signs the token, whose id is jti. A
// resource the definition names was registered when the definition was
// made, and resources are never removed: naming it is enough.
func (t *ConsentTokens) consentToken(ctx context.Context, c orgs.StoredClient, con Consent, resource, jkt, jti string) (Token, error) {
	now := t.now()
	switch {
	case con.Status != StatusAccepted:
		return Token{}, t.refuse(ctx, c, con.FlowID, resource, "The flow's consent is "+con.Status+", not Accepted.")
	case !con.InForce(now):
		return Token{}, t.refuse(ctx, c, con.FlowID, resource, "The flow's consent is no longer in force: its validity ended.")
	case !slices.Contains(con.Resources, resource):
		return Token{}, t.refuse(ctx, c, con.FlowID, resource, "The resource is not one the flow's consent definition names.")
	}
	expiry := now.Add(t.ttl)
	if con.ValidUntil != nil && con.ValidUntil.Before(expiry) {
		expiry = *con.ValidUntil
	}
	detail := consentDetail(con, resource)
	claims := consentClaims{Issuer: t.cfg.Issuer, Subject: c.ID, ClientID: c.ID, Audience: resource,
		Expiry: expiry.Unix(), IssuedAt: now.Unix(), NotBefore: now.Unix(), ID: jti,
		AuthorizationDetails: []ConsentDetail{detail}}
	tokenType := "Bearer"
	if jkt != "" {
		claims.Confirmation, tokenType = &confirmation{JKT: jkt}, "DPoP"
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return Token{}, err
	}
	at, err := t.keys.SignTypedToken(ctx, keys.ConsentTokenType, payload)
	if err != nil {
		return Token{}, err
	}
	answer, err := json.Marshal([]ConsentDetail{detail})
	if err != nil {
		return Token{}, err
	}
	return Token{AccessToken: at, ExpiresIn: int(expiry.Unix() - now.Unix()), TokenType: tokenType, AuthorizationDetails: string(answer)}, nil
}

// refuse audits a refused consent token and returns the
// invalid_authorization_details error that says why.
func (t *ConsentTokens) refuse(ctx context.Context, c orgs.StoredClient, flowID, resource, why string) error {
	return t.refuseAs(ctx, c, ErrCodeInvalidAuthorizationDetails, flowID, resource, why)
}

// refuseAs audits a refused consent token and returns the error of code.
func (t *ConsentTokens) refuseAs(ctx context.Context, c orgs.StoredClient, code, flowID, resource, why string) error {
	err := database.WithTx(ctx, t.pool, func(tx database.Tx) error {
		return t.audit.RecordAuditTx(ctx, tx, refusalEntry(c, flowID, resource, why))
	})
	if err != nil {
		return database.Classify(err)
	}
	t.log.InfoContext(ctx, "identity: consent token refused", "client_id", c.ID, "reason", why)
	return tokenErr(code, why)
}

// refusalEntry is the audit entry of a refused consent token. It names the
// flow only by an id of a flow's form, and cuts the resource short: both
// come from the client, unchecked.
func refusalEntry(c orgs.StoredClient, flowID, resource, why string) identity.AuditEntry {
	target := ""
	if len(flowID) <= 64 && !strings.ContainsFunc(flowID, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' }) && flowID != "" {
		target = "flow " + flowID
	}
	detail := why
	if resource != "" {
		shown := []rune(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				return -1
			}
			return r
		}, resource))
		detail += " Resource: " + string(shown[:min(len(shown), 200)])
	}
	return identity.AuditEntry{OrganizationID: c.OrganizationID, Actor: "client:" + c.ID,
		Action: identity.AuditConsentTokenRefused, Target: target, Detail: detail}
}

// isConsentToken reports whether raw is a JWS whose typ is a consent
// token's; nothing is verified.
func isConsentToken(raw string) bool {
	header, _, ok := strings.Cut(raw, ".")
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return false
	}
	var h struct {
		Typ string `json:"typ"`
	}
	return json.Unmarshal(b, &h) == nil && h.Typ == keys.ConsentTokenType
}

// verifyConsentToken checks a consent token's signature, issuer, typ and
// times. ok is false for any token that fails; err is kept only when the
// database could not be asked.
func (t *ConsentTokens) verifyConsentToken(ctx context.Context, raw string) (consentClaims, bool, error) {
	if len(raw) > maxTokenLen {
		return consentClaims{}, false, nil
	}
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{keys.AccessTokenAlgorithm})
	if err != nil || len(jws.Signatures) != 1 {
		return consentClaims{}, false, nil //nolint:nilerr // not a token: inactive, as any other
	}
	h := jws.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != keys.ConsentTokenType {
		return consentClaims{}, false, nil
	}
	pub, err := t.keys.AccessTokenKey(ctx, h.KeyID)
	if err != nil {
		return consentClaims{}, false, onlyUnavailable(err)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return consentClaims{}, false, nil //nolint:nilerr // a bad signature: inactive
	}
	var c consentClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return consentClaims{}, false, nil //nolint:nilerr // claims that do not read: inactive
	}
	now := t.now().Unix()
	if c.Issuer != t.cfg.Issuer || now >= c.Expiry || c.NotBefore > now+60 || len(c.AuthorizationDetails) != 1 ||
		c.AuthorizationDetails[0].Type != ConsentDetailsType {
		return consentClaims{}, false, nil
	}
	return c, true, nil
}

// Introspect implements Provider. A consent token is active to a client of
// the data holder that registered its audience, with the scope
// consents:introspect, while the consent is in force, read now: a
// withdrawal, an expiry or an erasure turns it inactive at once. To any
// other client it is inactive, whatever it is. Other tokens are the token
// service's.
func (t *ConsentTokens) Introspect(ctx context.Context, req ClientTokenRequest) (Introspection, error) {
	if !isConsentToken(req.Token) {
		return t.Service.Introspect(ctx, req)
	}
	c, err := t.authenticateClient(ctx, req.ClientAuth)
	if err != nil {
		return Introspection{}, err
	}
	out, err := t.introspectConsentToken(ctx, c, req.Token)
	out.Requester = c.ID
	return out, err
}

// introspectConsentToken answers c about the consent token raw.
func (t *ConsentTokens) introspectConsentToken(ctx context.Context, c orgs.StoredClient, raw string) (Introspection, error) {
	claims, ok, err := t.verifyConsentToken(ctx, raw)
	if !ok || !slices.Contains(c.Scopes, identity.ScopeConsentsIntrospect) {
		return Introspection{}, err
	}
	res, err := t.consents.Resource(ctx, claims.Audience)
	if errors.Is(err, ErrUnknownResource) || (err == nil && res.OrganizationID != c.OrganizationID) {
		return Introspection{}, nil
	}
	if err != nil {
		return Introspection{}, err
	}
	d := claims.AuthorizationDetails[0]
	con, err := t.consents.Consent(ctx, d.To.OrganizationID, d.ID)
	if errors.Is(err, ErrNoConsent) {
		return Introspection{}, nil
	}
	if err != nil {
		return Introspection{}, err
	}
	if !con.InForce(t.now()) {
		return Introspection{}, nil
	}
	details, err := json.Marshal(claims.AuthorizationDetails)
	if err != nil {
		return Introspection{}, err
	}
	out := Introspection{Active: true, ClientID: claims.ClientID, TokenType: "Bearer",
		Expiry: time.Unix(claims.Expiry, 0), IssuedAt: time.Unix(claims.IssuedAt, 0), NotBefore: time.Unix(claims.NotBefore, 0),
		Subject: claims.Subject, Audience: claims.Audience, Issuer: claims.Issuer, JWTID: claims.ID,
		OrganizationID: d.To.OrganizationID, AuthorizationDetails: string(details)}
	if jkt := claims.Confirmation.thumbprint(); jkt != "" {
		out.TokenType, out.DPoPJKT = "DPoP", jkt
	}
	return out, nil
}

// SignIntrospection implements Provider.
func (s *Service) SignIntrospection(ctx context.Context, clientID string, answer []byte) (string, error) {
	payload, err := json.Marshal(struct {
		Issuer   string          `json:"iss"`
		Audience string          `json:"aud"`
		IssuedAt int64           `json:"iat"`
		Answer   json.RawMessage `json:"token_introspection"`
	}{s.cfg.Issuer, clientID, s.now().Unix(), answer})
	if err != nil {
		return "", err
	}
	return s.keys.SignTypedToken(ctx, keys.IntrospectionType, payload)
}
