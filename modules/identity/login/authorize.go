package login

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/login/internal/store"
	"github.com/flowd/flowd/modules/identity/staff"
)

// AuthRequest is a validated authorization request.
type AuthRequest struct {
	Client        Client
	RedirectURI   string
	Scope         string
	State         string
	Nonce         string
	CodeChallenge string
	// Prompt is "", "login" (ask again even with a provider session) or
	// "none" (never ask).
	Prompt string
	// MaxAge, when not negative, is how many seconds ago the person may
	// last have signed in for a provider session to count.
	MaxAge int
	Method Method
	// ACRValues is the client's acr_values: the assurance it asks for, the
	// preferred first. A hint for the test eID's form; an overlong value is
	// ignored.
	ACRValues string
	// UILocales is the client's ui_locales: the person's preferred languages
	// for the sign-in form, BCP 47 tags separated by spaces, the preferred
	// first. It is a hint: an unknown language or an overlong value is
	// ignored, never refused.
	UILocales string
}

// maxUILocales bounds the ui_locales value kept; longer ones are ignored.
const maxUILocales = 256

// AuthorizeError is a refused authorization request. With RedirectURI set it
// goes back to the client (RFC 6749 4.1.2.1) from Issuer; without, the
// request's client or redirect URI could not be trusted and the person sees
// an error page.
type AuthorizeError struct {
	Code        string
	Description string
	RedirectURI string
	State       string
	Issuer      string
}

func (e *AuthorizeError) Error() string { return e.Code + ": " + e.Description }

// RedirectURL is where the browser goes with the error. It names the issuer,
// as a success does, so that a client of several providers knows which one
// answered (RFC 9207).
func (e *AuthorizeError) RedirectURL() string {
	q := url.Values{"error": {e.Code}, "error_description": {e.Description}, "iss": {e.Issuer}}
	if e.State != "" {
		q.Set("state", e.State)
	}
	return appendQuery(e.RedirectURI, q)
}

var codeChallengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// ParseAuthorize validates the parameters of "GET/POST /oauth/authorize".
// An unknown client or unregistered redirect URI is an error shown to the
// person; anything else goes back to the client with its state.
func (p *Provider) ParseAuthorize(q url.Values) (AuthRequest, error) {
	c, ok := p.Client(q.Get("client_id"))
	if !ok {
		return AuthRequest{}, &AuthorizeError{Code: "invalid_client", Description: "The application asking you to sign in is not registered here."}
	}
	redirect := q.Get("redirect_uri")
	if !slices.Contains(c.RedirectURIs, redirect) {
		return AuthRequest{}, &AuthorizeError{Code: "invalid_request", Description: "The application's return address is not registered here."}
	}
	r := AuthRequest{Client: c, RedirectURI: redirect, Scope: q.Get("scope"), State: q.Get("state"),
		Nonce: q.Get("nonce"), CodeChallenge: q.Get("code_challenge"), Prompt: q.Get("prompt"), Method: c.Method}
	r.MaxAge = -1
	if ul := q.Get("ui_locales"); len(ul) <= maxUILocales {
		r.UILocales = ul
	}
	if av := q.Get("acr_values"); len(av) <= maxUILocales {
		r.ACRValues = av
	}
	if ma := q.Get("max_age"); ma != "" {
		n, err := strconv.Atoi(ma)
		if err != nil || n < 0 {
			return AuthRequest{}, &AuthorizeError{Code: "invalid_request", Description: "max_age must be a whole number of seconds.",
				RedirectURI: redirect, State: r.State, Issuer: p.cfg.Issuer}
		}
		r.MaxAge = n
	}
	fail := func(code, desc string) (AuthRequest, error) {
		return AuthRequest{}, &AuthorizeError{Code: code, Description: desc, RedirectURI: redirect, State: r.State, Issuer: p.cfg.Issuer}
	}
	switch {
	case q.Get("response_type") != "code":
		return fail("unsupported_response_type", "Only response_type=code is supported.")
	case q.Get("response_mode") != "" && q.Get("response_mode") != "query":
		return fail("invalid_request", "Only response_mode=query is supported.")
	case !hasScope(r.Scope, "openid"):
		return fail("invalid_scope", "The scope must include openid.")
	case r.State == "" || len(r.State) > 512:
		return fail("invalid_request", "state is required (at most 512 characters).")
	case r.Nonce == "" || len(r.Nonce) > 512:
		return fail("invalid_request", "nonce is required (at most 512 characters).")
	case r.CodeChallenge == "":
		return fail("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256.")
	case q.Get("code_challenge_method") != "S256":
		return fail("invalid_request", "code_challenge_method must be S256.")
	case !codeChallengeRE.MatchString(r.CodeChallenge):
		return fail("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters).")
	case q.Get("request") != "" || q.Get("request_uri") != "":
		return fail("request_not_supported", "Request objects are not supported.")
	case r.Prompt != "" && r.Prompt != "login" && r.Prompt != "none" && r.Prompt != "consent":
		return fail("invalid_request", "prompt must be none, login or consent.")
	}
	if r.Method == MethodTestEID && !p.cfg.TestEID {
		return fail("access_denied", "The test eID is turned off on this server.")
	}
	return r, nil
}

// LoginRequired is the answer to prompt=none without a provider session.
func (p *Provider) LoginRequired(r AuthRequest) *AuthorizeError {
	return &AuthorizeError{Code: "login_required", Description: "Sign-in is required.", RedirectURI: r.RedirectURI, State: r.State,
		Issuer: p.cfg.Issuer}
}

// Pending is a sign-in form waiting for its person.
type Pending struct {
	ID         string
	Method     Method
	ClientName string
	// FormToken is the CSRF token the form must send back.
	FormToken string
}

// ErrLoginExpired: the sign-in form is stale, completed, or from another browser.
var ErrLoginExpired = apperr.New(apperr.Invalid, "This sign-in page has expired. Go back to the application and start again.")

// BeginLogin stores r while the person signs in, bound to browserID (a random
// value of the browser's provider cookie), and returns the pending form.
func (p *Provider) BeginLogin(ctx context.Context, r AuthRequest, browserID string) (Pending, error) {
	id := randomToken()
	err := p.store.CreateRequest(ctx, store.Request{
		ID: id, BrowserHash: hashOf(browserID), ClientID: r.Client.ID, RedirectURI: r.RedirectURI, Scope: r.Scope,
		State: r.State, Nonce: r.Nonce, CodeChallenge: r.CodeChallenge, Method: string(r.Method),
		ExpiresAt: timeNow().Add(p.cfg.RequestTTL),
	})
	if err != nil {
		return Pending{}, err
	}
	return Pending{ID: id, Method: r.Method, ClientName: r.Client.Name, FormToken: p.formToken(id, browserID)}, nil
}

// PendingLogin returns the pending form id from browserID.
func (p *Provider) PendingLogin(ctx context.Context, id, browserID string) (Pending, error) {
	req, err := p.pending(ctx, id, browserID, p.formToken(id, browserID))
	if err != nil {
		return Pending{}, err
	}
	c, _ := p.Client(req.ClientID)
	return Pending{ID: id, Method: Method(req.Method), ClientName: c.Name, FormToken: p.formToken(id, browserID)}, nil
}

func (p *Provider) formToken(id, browserID string) string {
	m := hmac.New(sha256.New, p.pseudoKey)
	m.Write([]byte("login form\x00" + id + "\x00" + browserID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (p *Provider) pending(ctx context.Context, id, browserID, token string) (store.Request, error) {
	if id == "" || browserID == "" || len(id) > 64 {
		return store.Request{}, ErrLoginExpired
	}
	req, ok, err := p.store.RequestByID(ctx, id)
	if err != nil {
		return req, err
	}
	if !ok || subtle.ConstantTimeCompare(req.BrowserHash, hashOf(browserID)) != 1 ||
		!hmac.Equal([]byte(token), []byte(p.formToken(id, browserID))) {
		return req, ErrLoginExpired
	}
	return req, nil
}

// CompleteStaffLogin checks the staff form of pending request id and returns
// the client's redirect URL with a code, and the account signed in. sid
// names the provider session the sign-in starts; the ID token carries it,
// so that the client's session ends with that one. Errors:
// ErrLoginExpired, staff.ErrBadCredentials, a rate-limited apperr.
func (p *Provider) CompleteStaffLogin(ctx context.Context, id, browserID, token, username, password, address, sid string) (string, staff.Account, error) {
	req, err := p.pending(ctx, id, browserID, token)
	if err != nil {
		return "", staff.Account{}, err
	}
	if Method(req.Method) != MethodStaff {
		return "", staff.Account{}, ErrLoginExpired
	}
	a, err := p.staff.AuthenticateStaff(ctx, username, password, address)
	if err != nil {
		return "", a, err
	}
	to, err := p.issueCode(ctx, req, p.staffClaims(a, sid), timeNow(), id)
	return to, a, err
}

// IssueForStaff completes r at once for a staff member who holds provider
// session sid from an earlier sign-in at authTime; the account must still
// be enabled. Errors: staff.ErrBadCredentials for a disabled or gone account.
func (p *Provider) IssueForStaff(ctx context.Context, r AuthRequest, staffID, sid string, authTime time.Time) (string, error) {
	a, err := p.staff.StaffByID(ctx, staffID)
	if errors.Is(err, staff.ErrAccountNotFound) || (err == nil && a.Disabled) {
		return "", staff.ErrBadCredentials
	}
	if err != nil {
		return "", err
	}
	req := store.Request{ClientID: r.Client.ID, RedirectURI: r.RedirectURI, Scope: r.Scope, State: r.State,
		Nonce: r.Nonce, CodeChallenge: r.CodeChallenge, Method: string(r.Method)}
	return p.issueCode(ctx, req, p.staffClaims(a, sid), authTime, "")
}

var nationalIDRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// ErrBadLevel: the test eID was asked for a level it does not offer.
var ErrBadLevel = apperr.InvalidFields([]apperr.FieldError{{Field: "level", Message: "must be one of the levels offered"}})

// ErrBadNationalID: the test eID's national id is not 1–64 letters, digits or -.
var ErrBadNationalID = apperr.InvalidFields([]apperr.FieldError{{Field: "national_id", Message: "must be 1 to 64 letters, digits or -"}})

// CompleteTestEID signs the person in as nationalID, at the assurance level
// picked, through the test eID. Errors: ErrLoginExpired, ErrBadNationalID,
// ErrBadLevel, apperr Forbidden when the test eID is off.
func (p *Provider) CompleteTestEID(ctx context.Context, id, browserID, token, nationalID, level string) (string, error) {
	if !p.cfg.TestEID {
		return "", apperr.New(apperr.Forbidden, "The test eID is turned off on this server.")
	}
	req, err := p.pending(ctx, id, browserID, token)
	if err != nil {
		return "", err
	}
	if Method(req.Method) != MethodTestEID {
		return "", ErrLoginExpired
	}
	nationalID = strings.TrimSpace(nationalID)
	if !nationalIDRE.MatchString(nationalID) {
		return "", ErrBadNationalID
	}
	if level == "" {
		// A form posted without a choice (a script: the page's radios are
		// required) takes the level preselected when nothing is asked for.
		level = p.TestEIDLevelsFor("").Selected
	}
	acr := ""
	for _, l := range p.cfg.TestEIDLevels {
		if l.Level == level {
			acr = l.ACR
		}
	}
	if acr == "" {
		return "", ErrBadLevel
	}
	claims := map[string]any{
		"sub":                 p.pseudonym(nationalID),
		"acr":                 acr,
		p.cfg.NationalIDClaim: nationalID,
		"name":                "Test person",
		"preferred_username":  "test-eid",
		"flowd_test_identity": true,
	}
	return p.issueCode(ctx, req, claims, timeNow(), id)
}

// staffClaims are the claims of a staff member's ID token; sid names the
// provider session (OpenID Connect Front-Channel Logout 1.0, section 3).
func (p *Provider) staffClaims(a staff.Account, sid string) map[string]any {
	name := a.Name
	if name == "" {
		name = a.Username
	}
	claims := map[string]any{
		"sub":                a.ID,
		"preferred_username": a.Username,
		"name":               name,
		p.cfg.OrgClaim:       a.OrganizationID,
		p.cfg.RolesClaim:     []string{string(a.Role)},
	}
	if sid != "" {
		claims["sid"] = sid
	}
	return claims
}

// codeClaims is what a code carries, sealed, to the token endpoint.
type codeClaims struct {
	Nonce    string         `json:"nonce"`
	AuthTime int64          `json:"auth_time"`
	Identity map[string]any `json:"identity"`
}

func (p *Provider) issueCode(ctx context.Context, req store.Request, claims map[string]any, authTime time.Time, requestID string) (string, error) {
	b, err := json.Marshal(codeClaims{Nonce: req.Nonce, AuthTime: authTime.Unix(), Identity: claims})
	if err != nil {
		return "", err
	}
	sealed, err := p.seal(b)
	if err != nil {
		return "", err
	}
	code := randomToken()
	err = database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		return p.store.IssueCodeTx(ctx, tx, store.Code{
			Hash: hashOf(code), ClientID: req.ClientID, RedirectURI: req.RedirectURI, CodeChallenge: req.CodeChallenge,
			Scope: req.Scope, Claims: sealed, ExpiresAt: timeNow().Add(p.cfg.CodeTTL),
		}, requestID)
	})
	if errors.Is(err, store.ErrRequestGone) {
		return "", ErrLoginExpired
	}
	if err != nil {
		return "", err
	}
	return appendQuery(req.RedirectURI, url.Values{"code": {code}, "state": {req.State}, "iss": {p.cfg.Issuer}}), nil
}

// TokenResponse is the token endpoint's answer to a code.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
	IDToken     string `json:"id_token"`
	Scope       string `json:"scope"`
}

// ExchangeCode answers "POST /oauth/token" with grant_type=authorization_code.
// The token handler authenticates nothing for this grant: it passes the
// form and the client credentials it found (body or HTTP Basic) here. Errors
// are *OAuthError (invalid_client 401, invalid_grant 400, invalid_request
// 400) or internal ones. A code works once within its 60 seconds; presented
// again it also revokes the access token it issued.
func (p *Provider) ExchangeCode(ctx context.Context, form url.Values, clientID, clientSecret string) (TokenResponse, error) {
	c, ok := p.Client(clientID)
	if !ok || (c.Secret != "" && subtle.ConstantTimeCompare([]byte(clientSecret), []byte(c.Secret)) != 1) {
		return TokenResponse{}, &OAuthError{Status: http.StatusUnauthorized, Code: "invalid_client", Description: "Client authentication failed."}
	}
	code, verifier := form.Get("code"), form.Get("code_verifier")
	if code == "" {
		return TokenResponse{}, &OAuthError{Status: http.StatusBadRequest, Code: "invalid_request", Description: "code is required."}
	}
	if verifier == "" {
		return TokenResponse{}, &OAuthError{Status: http.StatusBadRequest, Code: "invalid_request", Description: "code_verifier is required (PKCE)."}
	}
	var resp TokenResponse
	var refused *OAuthError
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		row, found, err := p.store.LockCodeTx(ctx, tx, hashOf(code))
		if err != nil {
			return err
		}
		if !found {
			refused = invalidGrant("The code is unknown or expired.")
			return nil
		}
		if row.UsedAt != nil {
			// A replayed code: whoever holds it may be an attacker, so what
			// the first use issued is revoked too (RFC 6749 4.1.2).
			refused = invalidGrant("The code was used already.")
			return p.store.RevokeTokensOfCodeTx(ctx, tx, row.Hash)
		}
		// Any presentation uses the code up, so a wrong verifier cannot be retried.
		if err := p.store.MarkCodeUsedTx(ctx, tx, row.Hash); err != nil {
			return err
		}
		switch {
		case row.ExpiresAt.Before(timeNow()):
			refused = invalidGrant("The code is unknown or expired.")
		case row.ClientID != c.ID:
			refused = invalidGrant("The code was issued to another client.")
		case form.Get("redirect_uri") != row.RedirectURI:
			refused = invalidGrant("redirect_uri does not match the authorization request.")
		case !pkceMatches(verifier, row.CodeChallenge):
			refused = invalidGrant("The PKCE code_verifier does not match the code_challenge.")
		}
		if refused != nil {
			return nil //nolint:nilerr // the refusal commits: a failed exchange still uses the code up
		}
		resp, err = p.tokensFor(ctx, tx, c, row)
		return err
	})
	if err != nil {
		return TokenResponse{}, err
	}
	if refused != nil {
		return TokenResponse{}, refused
	}
	return resp, nil
}

var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// pkceMatches checks an S256 code verifier (RFC 7636 4.6).
func pkceMatches(verifier, challenge string) bool {
	if !verifierRE.MatchString(verifier) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

func (p *Provider) tokensFor(ctx context.Context, tx pgx.Tx, c Client, row store.Code) (TokenResponse, error) {
	plain, err := p.open(row.Claims)
	if err != nil {
		return TokenResponse{}, err
	}
	var cc codeClaims
	if err := json.Unmarshal(plain, &cc); err != nil {
		return TokenResponse{}, err
	}
	now := timeNow()
	id := map[string]any{}
	for k, v := range cc.Identity {
		id[k] = v
	}
	id["iss"] = p.cfg.Issuer
	id["aud"] = row.ClientID
	id["azp"] = row.ClientID
	id["iat"] = now.Unix()
	id["exp"] = now.Add(p.cfg.TokenTTL).Unix()
	id["auth_time"] = cc.AuthTime
	id["nonce"] = cc.Nonce
	idToken, err := p.signer.SignIDToken(ctx, c.idTokenAlg(), id)
	if err != nil {
		return TokenResponse{}, err
	}
	userinfo := map[string]any{}
	for k, v := range cc.Identity {
		userinfo[k] = v
	}
	b, err := json.Marshal(userinfo)
	if err != nil {
		return TokenResponse{}, err
	}
	sealed, err := p.seal(b)
	if err != nil {
		return TokenResponse{}, err
	}
	access := randomToken()
	if err := p.store.InsertAccessTokenTx(ctx, tx, store.AccessToken{
		Hash: hashOf(access), CodeHash: row.Hash, ClientID: row.ClientID, Claims: sealed, ExpiresAt: now.Add(p.cfg.TokenTTL),
	}); err != nil {
		return TokenResponse{}, err
	}
	return TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(p.cfg.TokenTTL.Seconds()),
		IDToken: idToken, Scope: row.Scope}, nil
}

// UserInfo answers "GET /oauth/userinfo" for an access token from ExchangeCode.
// Errors: *OAuthError invalid_token (401).
func (p *Provider) UserInfo(ctx context.Context, accessToken string) (map[string]any, error) {
	invalid := &OAuthError{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "The access token is invalid, expired or revoked."}
	if accessToken == "" || len(accessToken) > 128 {
		return nil, invalid
	}
	t, ok, err := p.store.ActiveAccessToken(ctx, hashOf(accessToken))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid
	}
	plain, err := p.open(t.Claims)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(plain, &claims)
}

// EndSession validates "GET /oauth/end_session" (RP-initiated logout 1.0)
// and returns where to send the browser after the provider session is gone:
// the registered post_logout_redirect_uri with state, or "" for the
// provider's own signed-out page. An unregistered URI is an
// *AuthorizeError without redirect.
func (p *Provider) EndSession(ctx context.Context, q url.Values) (string, error) {
	clientID := q.Get("client_id")
	if hint := q.Get("id_token_hint"); hint != "" {
		aud, err := p.audienceOfOwnToken(ctx, hint)
		if err != nil {
			return "", &AuthorizeError{Code: "invalid_request", Description: "The id_token_hint was not issued here."}
		}
		if clientID != "" && clientID != aud {
			return "", &AuthorizeError{Code: "invalid_request", Description: "client_id does not match the id_token_hint."}
		}
		clientID = aud
	}
	to := q.Get("post_logout_redirect_uri")
	if to == "" {
		return "", nil
	}
	c, ok := p.Client(clientID)
	if !ok || !slices.Contains(c.PostLogoutRedirectURIs, to) {
		return "", &AuthorizeError{Code: "invalid_request", Description: "The address to return to after signing out is not registered here."}
	}
	if st := q.Get("state"); st != "" {
		return appendQuery(to, url.Values{"state": {st}}), nil
	}
	return to, nil
}

// audienceOfOwnToken verifies that raw was signed by this provider (expired
// tokens are fine as hints) and returns its single audience.
func (p *Provider) audienceOfOwnToken(ctx context.Context, raw string) (string, error) {
	jws, err := jose.ParseSignedCompact(raw, keys.IDTokenAlgorithms)
	if err != nil {
		return "", err
	}
	keys, err := p.signer.PublicJWKS(ctx)
	if err != nil {
		return "", err
	}
	var payload []byte
	for _, k := range keys.Keys {
		if len(jws.Signatures) > 0 && jws.Signatures[0].Header.KeyID != "" && k.KeyID != jws.Signatures[0].Header.KeyID {
			continue
		}
		if payload, err = jws.Verify(k); err == nil {
			break
		}
	}
	if payload == nil {
		return "", errors.New("id_token_hint: no key verifies it")
	}
	var c struct {
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Iss != p.cfg.Issuer {
		return "", errors.New("id_token_hint: another issuer")
	}
	var aud string
	if err := json.Unmarshal(c.Aud, &aud); err != nil {
		var auds []string
		if err := json.Unmarshal(c.Aud, &auds); err != nil || len(auds) != 1 {
			return "", errors.New("id_token_hint: no single audience")
		}
		aud = auds[0]
	}
	return aud, nil
}

// appendQuery adds q to the query u already has.
func appendQuery(u string, q url.Values) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	all := parsed.Query()
	for k, vs := range q {
		for _, v := range vs {
			all.Add(k, v)
		}
	}
	parsed.RawQuery = all.Encode()
	return parsed.String()
}
