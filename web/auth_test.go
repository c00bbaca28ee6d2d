package web_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// TestBearerChallenges checks WWW-Authenticate as RFC 6750 §3 has it: a
// request without credentials, or with another scheme's, is told only the
// scheme and realm; a token that fails verification is invalid_token; a
// token without the route's scope is insufficient_scope.
func TestBearerChallenges(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	token := func(id, secret string) string {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
		resp, m := webtest.PostToken(t, ts.URL+"/oauth/token", "application/x-www-form-urlencoded", form.Encode(), "")
		if resp.StatusCode != 200 {
			t.Fatalf("token: %d %v", resp.StatusCode, m)
		}
		return m["access_token"].(string)
	}
	full, reader := token(ts.Full.ID, ts.Full.Secret), token(ts.Reader.ID, ts.Reader.Secret)
	// A changed character inside the signature (the last one may only hold padding bits).
	i := len(full) - 10
	tampered := full[:i] + map[bool]string{true: "A", false: "B"}[full[i] != 'A'] + full[i+1:]

	tests := []struct {
		name          string
		authorization string
		status        int
		challenge     string
	}{
		{"no credentials", "", 401, `Bearer realm="flowd"`},
		{"another scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")), 401, `Bearer realm="flowd"`},
		{"the scheme without a token", "Bearer", 401, `Bearer realm="flowd"`},
		{"not a token", "Bearer nonsense", 401, `Bearer realm="flowd", error="invalid_token"`},
		{"a tampered token", "Bearer " + tampered, 401, `Bearer realm="flowd", error="invalid_token"`},
		{"a token without the scope", "Bearer " + reader, 403, `Bearer realm="flowd", error="insufficient_scope", scope="flows:write"`},
		{"a good token", "Bearer " + full, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", ts.URL+"/api/test-principal", nil)
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("WWW-Authenticate") != tt.challenge {
				t.Fatalf("%d %q, want %d %q: %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.status, tt.challenge, b)
			}
			if tt.status == 401 && resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}
