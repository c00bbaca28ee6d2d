package oidclogin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
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
