package oidclogin

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// discoveryServer is a provider that only publishes its discovery document:
// enough for Begin, which never calls the provider's other endpoints.
func discoveryServer(t *testing.T) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
			"jwks_uri": srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"ES256"},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestBeginAddsTheSignInsOwnParameters(t *testing.T) {
	t.Parallel()
	idp := discoveryServer(t)
	tests := []struct {
		name       string
		configured url.Values
		params     url.Values
		want       url.Values // parameters the authorization URL must carry
		absent     []string   // and must not
	}{
		{"none", nil, nil, url.Values{"client_id": {"rp"}}, []string{"ui_locales"}},
		{"ui_locales", nil, url.Values{"ui_locales": {"nb en"}}, url.Values{"ui_locales": {"nb en"}}, nil},
		{"with configured ones", url.Values{"acr_values": {"substantial"}}, url.Values{"ui_locales": {"en"}},
			url.Values{"acr_values": {"substantial"}, "ui_locales": {"en"}}, nil},
		{"over a configured one", url.Values{"ui_locales": {"se"}, "acr_values": {"high"}}, url.Values{"ui_locales": {"nb en"}},
			url.Values{"ui_locales": {"nb en"}, "acr_values": {"high"}}, nil},
		{"an empty one is left out", nil, url.Values{"ui_locales": {""}}, url.Values{"client_id": {"rp"}}, []string{"ui_locales"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rp := New(Config{Name: "consent", Issuer: idp.URL, ClientID: "rp", Scopes: []string{"openid"},
				RedirectURL: "https://rp.example/callback", AuthParams: tt.configured, SessionKey: make([]byte, 32)})
			to, err := rp.Begin(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil), "/back", tt.params)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(to)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if u.Scheme+"://"+u.Host+u.Path != idp.URL+"/authorize" || q.Get("state") == "" || q.Get("nonce") == "" ||
				q.Get("code_challenge_method") != "S256" {
				t.Fatalf("not an authorization request: %s", to)
			}
			for k, want := range tt.want {
				if got := q[k]; len(got) != 1 || got[0] != want[0] {
					t.Errorf("%s = %q, want %q (in %s)", k, got, want, to)
				}
			}
			for _, k := range tt.absent {
				if q.Has(k) {
					t.Errorf("%s is present: %s", k, to)
				}
			}
		})
	}
}

// TestFinishChecksTheIssuerOfTheResponse: a response, success or error, that
// names another issuer is refused (RFC 9207 2.4), and so is one without iss
// from a provider that says it always sends one; no code is exchanged then.
func TestFinishChecksTheIssuerOfTheResponse(t *testing.T) {
	t.Parallel()
	provider := func(t *testing.T, sendsIss bool) (*httptest.Server, *atomic.Int32) {
		var srv *httptest.Server
		var exchanges atomic.Int32
		srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/.well-known/openid-configuration":
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]any{
					"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
					"jwks_uri": srv.URL + "/jwks", "authorization_response_iss_parameter_supported": sendsIss,
				})
			case "/token":
				exchanges.Add(1)
				http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			default:
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(srv.Close)
		return srv, &exchanges
	}
	const other = "https://mix-up.example"
	tests := []struct {
		name     string
		sendsIss bool
		iss      string // "" leaves iss out; "ours" is the provider's issuer
		query    url.Values
		want     string // "rejected", "provider error", or "exchanged"
	}{
		{"error from another issuer", false, other, url.Values{"error": {"access_denied"}}, "rejected"},
		{"code from another issuer", false, other, url.Values{"code": {"c"}}, "rejected"},
		{"error without iss from a provider that sends it", true, "", url.Values{"error": {"access_denied"}}, "rejected"},
		{"code without iss from a provider that sends it", true, "", url.Values{"code": {"c"}}, "rejected"},
		{"error with our iss", true, "ours", url.Values{"error": {"access_denied"}}, "provider error"},
		{"error without iss from a provider that does not send it", false, "", url.Values{"error": {"access_denied"}}, "provider error"},
		{"code with our iss", true, "ours", url.Values{"code": {"c"}}, "exchanged"},
		{"code without iss from a provider that does not send it", false, "", url.Values{"code": {"c"}}, "exchanged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			idp, exchanges := provider(t, tt.sendsIss)
			rp := New(Config{Name: "console", Issuer: idp.URL, ClientID: "rp", Scopes: []string{"openid"},
				RedirectURL: "https://rp.example/callback", SessionKey: make([]byte, 32)})
			begin := httptest.NewRecorder()
			to, err := rp.Begin(begin, httptest.NewRequest(http.MethodGet, "/", nil), "/back", nil)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(to)
			q := url.Values{"state": {u.Query().Get("state")}}
			for k, v := range tt.query {
				q[k] = v
			}
			switch tt.iss {
			case "ours":
				q.Set("iss", idp.URL)
			case "":
			default:
				q.Set("iss", tt.iss)
			}
			callback := httptest.NewRequest(http.MethodGet, "/callback?"+q.Encode(), nil)
			for _, c := range begin.Result().Cookies() {
				callback.AddCookie(c)
			}
			_, err = rp.Finish(httptest.NewRecorder(), callback)
			var pe *ProviderError
			got := "rejected"
			switch {
			case errors.As(err, &pe):
				got = "provider error"
			case exchanges.Load() > 0:
				got = "exchanged"
			case !errors.Is(err, ErrRejected):
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

func TestFinishPresentsTheCodeOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		methods    []string // the provider's token_endpoint_auth_methods_supported
		wantSecret string   // where the client's secret must travel: "header" or "form"
	}{
		{"the discovery default", nil, "header"},
		{"basic offered", []string{"client_secret_post", "client_secret_basic"}, "header"},
		{"only post offered", []string{"client_secret_post"}, "form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The provider uses the code up at its first presentation, and
			// its answer is lost on the way back, as behind a proxy that
			// gave up on a slow answer.
			var srv *httptest.Server
			var presented atomic.Int32
			var secretIn atomic.Value
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/.well-known/openid-configuration":
					doc := map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
						"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/jwks"}
					if tt.methods != nil {
						doc["token_endpoint_auth_methods_supported"] = tt.methods
					}
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(doc)
				case "/token":
					_, _, basic := r.BasicAuth()
					if presented.Add(1) == 1 {
						secretIn.Store(map[bool]string{true: "header", false: "form"}[basic])
						http.Error(w, "upstream timed out", http.StatusBadGateway)
						return
					}
					http.Error(w, `{"error":"invalid_grant","error_description":"The code was used already."}`, http.StatusBadRequest)
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			rp := New(Config{Name: "console", Issuer: srv.URL, ClientID: "rp", ClientSecret: "s", Scopes: []string{"openid"},
				RedirectURL: "https://rp.example/callback", SessionKey: make([]byte, 32)})
			begin := httptest.NewRecorder()
			to, err := rp.Begin(begin, httptest.NewRequest(http.MethodGet, "/", nil), "/back", nil)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(to)
			callback := httptest.NewRequest(http.MethodGet, "/callback?"+url.Values{"state": {u.Query().Get("state")}, "code": {"c"}}.Encode(), nil)
			for _, c := range begin.Result().Cookies() {
				callback.AddCookie(c)
			}
			_, err = rp.Finish(httptest.NewRecorder(), callback)
			if n := presented.Load(); n != 1 {
				t.Errorf("the code was presented %d times, want once", n)
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("a lost answer of the token endpoint gave %v, want ErrUnavailable (try again), not a refusal", err)
			}
			if got := secretIn.Load(); got != tt.wantSecret {
				t.Errorf("the secret travelled in the %v, want the %s", got, tt.wantSecret)
			}
		})
	}
}
