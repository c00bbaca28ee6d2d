// Package oidclogin is flowd's OpenID Connect relying party, one
// implementation for the staff console and the consent pages: provider
// discovery and ID token verification through go-oidc, the code exchange
// with PKCE through x/oauth2, state and nonce checks, sessions in
// gorilla/sessions cookies whose records the server keeps (so that it can
// end them), and RP-initiated logout. The issuer, client and
// claim names are configuration, so an external provider (Keycloak, Entra,
// ID-porten, a BankID broker) replaces the built-in one without code changes.
package oidclogin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gorilla/sessions"
	"golang.org/x/oauth2"
)

// Config configures one relying party.
type Config struct {
	// Name tells the relying parties apart in cookie names: "console", "consent".
	Name         string
	Issuer       string
	ClientID     string
	ClientSecret string
	Scopes       []string
	// RedirectURL is the callback registered with the provider.
	RedirectURL string
	// PostLogoutRedirectURL is where the provider sends the browser after
	// RP-initiated logout; it must be registered with the provider too.
	PostLogoutRedirectURL string
	// AuthParams are extra authorization request parameters of every
	// sign-in (acr_values…), one value per name.
	AuthParams url.Values
	// SessionKey is FLOWD_SESSION_KEY; Secure sets the cookies' Secure flag.
	SessionKey []byte
	Secure     bool
	// HTTPClient talks to the provider; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
}

// RelyingParty signs people in at one provider.
type RelyingParty struct {
	cfg    Config
	client *http.Client
	flows  *flowStore

	mu       sync.Mutex
	provider *oidc.Provider
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
	endSess  string
	// issInResponse: the provider names itself in every authorization
	// response (RFC 9207), so a response without iss is refused.
	issInResponse bool
}

// New returns a relying party. It does not contact the provider: discovery
// happens at the first sign-in (and is retried after a failure), because the
// built-in provider is this very server, which is not listening yet.
func New(cfg Config) *RelyingParty {
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &RelyingParty{cfg: cfg, client: client,
		flows: newFlowStore(cfg.SessionKey, "flowd_"+cfg.Name+"_login", cfg.Secure)}
}

// Issuer is the provider's issuer URL.
func (rp *RelyingParty) Issuer() string { return rp.cfg.Issuer }

// Name is the relying party's name: "console" or "consent".
func (rp *RelyingParty) Name() string { return rp.cfg.Name }

// ErrUnavailable: the provider's discovery document could not be read.
var ErrUnavailable = errors.New("oidclogin: the identity provider is unreachable")

func (rp *RelyingParty) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.provider == nil {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, rp.client), rp.cfg.Issuer)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		var meta struct {
			EndSession    string   `json:"end_session_endpoint"`
			IssInResponse bool     `json:"authorization_response_iss_parameter_supported"`
			AuthMethods   []string `json:"token_endpoint_auth_methods_supported"`
		}
		_ = p.Claims(&meta)
		rp.provider, rp.endSess, rp.issInResponse = p, meta.EndSession, meta.IssInResponse
		endpoint := p.Endpoint()
		endpoint.AuthStyle = authStyle(meta.AuthMethods)
		rp.oauth = &oauth2.Config{ClientID: rp.cfg.ClientID, ClientSecret: rp.cfg.ClientSecret,
			Endpoint: endpoint, RedirectURL: rp.cfg.RedirectURL, Scopes: rp.cfg.Scopes}
		// The key set is fetched with our client, whatever context the
		// verification later runs in.
		rp.verifier = p.VerifierContext(oidc.ClientContext(context.WithoutCancel(ctx), rp.client),
			&oidc.Config{ClientID: rp.cfg.ClientID, SupportedSigningAlgs: []string{
				oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.EdDSA}})
	}
	return rp.oauth, rp.verifier, nil
}

// authStyle is how the client authenticates at the token endpoint, from
// the provider's discovery document: client_secret_basic unless it offers
// only client_secret_post (OpenID Connect Discovery's default is basic).
// It is never left to oauth2 to probe: the probe sends a code a second time
// when the first answer is lost, and a code works once, so a slow answer
// would turn into a refused sign-in.
func authStyle(methods []string) oauth2.AuthStyle {
	if slices.Contains(methods, "client_secret_post") && !slices.Contains(methods, "client_secret_basic") {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

// Begin starts a sign-in: it remembers state, nonce, PKCE verifier and
// returnTo in a short-lived cookie and returns the provider's authorization
// URL. params are extra authorization request parameters of this sign-in
// only, such as the person's ui_locales; they take the place of the same
// names in Config.AuthParams.
func (rp *RelyingParty) Begin(w http.ResponseWriter, r *http.Request, returnTo string, params url.Values) (string, error) {
	oc, _, err := rp.discover(r.Context())
	if err != nil {
		return "", err
	}
	f := flow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), ReturnTo: returnTo,
		Created: time.Now().Unix()}
	if err := rp.flows.add(w, r, f); err != nil {
		return "", err
	}
	opts := []oauth2.AuthCodeOption{oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)}
	for k, vs := range rp.cfg.AuthParams {
		if _, ok := params[k]; ok || len(vs) == 0 {
			continue
		}
		opts = append(opts, oauth2.SetAuthURLParam(k, vs[0]))
	}
	for k, vs := range params {
		if len(vs) > 0 && vs[0] != "" {
			opts = append(opts, oauth2.SetAuthURLParam(k, vs[0]))
		}
	}
	return oc.AuthCodeURL(f.State, opts...), nil
}

// Identity is a verified sign-in.
type Identity struct {
	Issuer   string
	Subject  string
	Claims   map[string]any
	IDToken  string
	ReturnTo string
}

// Errors of Finish.
var (
	// ErrState: the callback's state is unknown to this browser (forged,
	// replayed, or the sign-in took too long).
	ErrState = errors.New("oidclogin: unknown or expired state")
	// ErrRejected: the provider or the ID token failed a check.
	ErrRejected = errors.New("oidclogin: sign-in rejected")
)

// ProviderError is an error the provider sent back instead of a code
// (access_denied, login_required…).
type ProviderError struct{ Code, Description string }

func (e *ProviderError) Error() string {
	return "oidclogin: provider answered " + e.Code + ": " + e.Description
}

// Finish completes a sign-in at the callback: the state must be one this
// browser started, the code is exchanged with its PKCE verifier, and the ID
// token's signature, issuer, audience, expiry and nonce are verified.
func (rp *RelyingParty) Finish(w http.ResponseWriter, r *http.Request) (Identity, error) {
	q := r.URL.Query()
	f, ok := rp.flows.take(w, r, q.Get("state"))
	if !ok {
		return Identity{}, ErrState
	}
	oc, verifier, err := rp.discover(r.Context())
	if err != nil {
		return Identity{}, err
	}
	// RFC 9207: a response, error or not, that names an issuer must name
	// ours, and one from a provider that always names itself must.
	if iss := q.Get("iss"); iss != rp.cfg.Issuer && (iss != "" || rp.issInResponse) {
		return Identity{}, fmt.Errorf("%w: the response names issuer %q", ErrRejected, iss)
	}
	if e := q.Get("error"); e != "" {
		return Identity{ReturnTo: f.ReturnTo}, &ProviderError{Code: e, Description: q.Get("error_description")}
	}
	ctx := oidc.ClientContext(r.Context(), rp.client)
	tok, err := oc.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 && re.Response.StatusCode != http.StatusTooManyRequests {
			return Identity{}, fmt.Errorf("%w: code exchange: %w", ErrRejected, err)
		}
		return Identity{}, fmt.Errorf("%w: code exchange: %w", ErrUnavailable, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: no id_token in the token response", ErrRejected)
	}
	idt, err := verifier.Verify(ctx, raw)
	var ue *url.Error
	if errors.As(err, &ue) {
		// The provider's keys could not be fetched: nothing was refused.
		return Identity{}, fmt.Errorf("%w: the provider's keys: %w", ErrUnavailable, err)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: nonce mismatch", ErrRejected)
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return Identity{Issuer: idt.Issuer, Subject: idt.Subject, Claims: claims, IDToken: raw, ReturnTo: f.ReturnTo}, nil
}

// LogoutURL returns the provider's end-session URL for RP-initiated logout
// of a session with idToken, or "" when the provider offers none.
func (rp *RelyingParty) LogoutURL(ctx context.Context, idToken string) string {
	if _, _, err := rp.discover(ctx); err != nil || rp.endSess == "" {
		return ""
	}
	q := url.Values{"client_id": {rp.cfg.ClientID}}
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	if rp.cfg.PostLogoutRedirectURL != "" {
		q.Set("post_logout_redirect_uri", rp.cfg.PostLogoutRedirectURL)
	}
	u, err := url.Parse(rp.endSess)
	if err != nil {
		return ""
	}
	all := u.Query()
	for k, v := range q {
		all[k] = v
	}
	u.RawQuery = all.Encode()
	return u.String()
}

// flow is a sign-in in progress.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	ReturnTo string `json:"r"`
	Created  int64  `json:"c"`
}

// flowTTL bounds how long a sign-in may take; maxFlows how many tabs may
// sign in at once.
const (
	flowTTL  = 10 * time.Minute
	maxFlows = 4
)

// flowStore keeps sign-ins in progress in an encrypted cookie of their own.
type flowStore struct {
	cs   *sessions.CookieStore
	name string
}

func newFlowStore(key []byte, name string, secure bool) *flowStore {
	return &flowStore{cs: cookieStore(key, name, secure, flowTTL), name: name}
}

func (fs *flowStore) load(r *http.Request) (*sessions.Session, []flow) {
	sess, _ := fs.cs.New(r, fs.name)
	var flows []flow
	if b, ok := sess.Values["f"].(string); ok {
		_ = json.Unmarshal([]byte(b), &flows)
	}
	live := flows[:0]
	for _, f := range flows {
		if time.Since(time.Unix(f.Created, 0)) < flowTTL {
			live = append(live, f)
		}
	}
	return sess, live
}

func (fs *flowStore) save(w http.ResponseWriter, r *http.Request, sess *sessions.Session, flows []flow) error {
	b, err := json.Marshal(flows)
	if err != nil {
		return err
	}
	sess.Values = map[any]any{"f": string(b)}
	return fs.cs.Save(r, w, sess)
}

func (fs *flowStore) add(w http.ResponseWriter, r *http.Request, f flow) error {
	sess, flows := fs.load(r)
	flows = append(flows, f)
	if len(flows) > maxFlows {
		flows = flows[len(flows)-maxFlows:]
	}
	return fs.save(w, r, sess, flows)
}

// take removes and returns the flow of state: each state works once.
func (fs *flowStore) take(w http.ResponseWriter, r *http.Request, state string) (flow, bool) {
	if state == "" {
		return flow{}, false
	}
	sess, flows := fs.load(r)
	for i, f := range flows {
		if subtle.ConstantTimeCompare([]byte(f.State), []byte(state)) == 1 {
			rest := append(flows[:i:i], flows[i+1:]...)
			_ = fs.save(w, r, sess, rest)
			return f, true
		}
	}
	return flow{}, false
}
