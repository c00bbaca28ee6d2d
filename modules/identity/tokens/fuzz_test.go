package tokens

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzVerifyAccessToken feeds the verifier arbitrary strings, seeded with a
// real token and its mutations: it never panics, refuses with an
// unauthenticated error, and whatever it accepts is the real token's
// principal — a mutation may not change who the caller is.
func FuzzVerifyAccessToken(f *testing.F) {
	fx := newFixture(f, nil)
	real := fx.token(f).AccessToken
	want, err := fx.m.VerifyAccessToken(context.Background(), real)
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(real, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	hs := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	for _, seed := range []string{
		real, "", ".", "..", "a.b.c", real + ".", real + "x", parts[0] + "." + parts[1] + ".",
		none + "." + parts[1] + ".", hs + "." + parts[1] + "." + parts[2],
		parts[0] + ".e30." + parts[2], "eyJhbGciOiJFUzI1NiJ9.e30.AAAA", strings.Repeat("A", 5000),
		parts[0] + "." + parts[1] + "." + parts[2] + "." + parts[2],
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := fx.m.VerifyAccessToken(context.Background(), raw)
		if err != nil {
			return
		}
		if p.OrganizationID != want.OrganizationID || p.ClientID != want.ClientID || strings.Join(p.Scopes, " ") != strings.Join(want.Scopes, " ") {
			t.Fatalf("%q accepted as %+v; the real token is %+v", raw, p, want)
		}
	})
}

// FuzzVerifySignedClaims signs arbitrary claim sets with the provider's own
// key, as a bug in the issuer or a leaked signing path would: a set is
// accepted only when it names the configured issuer and audience, is
// unexpired, and names an existing client of the organization it claims.
func FuzzVerifySignedClaims(f *testing.F) {
	fx := newFixture(f, nil)
	good, _ := json.Marshal(fx.claims())
	f.Add(string(good))
	for _, change := range []map[string]any{
		{"aud": []string{"flowd", "other"}}, {"aud": 1}, {"exp": "tomorrow"}, {"exp": 1e30}, {"org_id": nil},
		{"iss": testIssuer + "/"}, {"scope": strings.Repeat("flows:read ", 1000)}, {"client_id": ""}, {"nbf": 1e12},
	} {
		c := fx.claims()
		for k, v := range change {
			c[k] = v
		}
		b, _ := json.Marshal(c)
		f.Add(string(b))
	}
	f.Add(`null`)
	f.Add(`[]`)
	f.Add(`{"iss":{"a":1}}`)
	f.Fuzz(func(t *testing.T, claims string) {
		raw, err := fx.m.SignAccessToken(context.Background(), []byte(claims))
		if err != nil {
			return
		}
		p, err := fx.m.VerifyAccessToken(context.Background(), raw)
		if err != nil {
			return
		}
		var c struct {
			Iss   string  `json:"iss"`
			Exp   float64 `json:"exp"`
			OrgID string  `json:"org_id"`
		}
		if json.Unmarshal([]byte(claims), &c) != nil {
			t.Fatalf("accepted claims that are not a JSON object: %q", claims)
		}
		if c.Iss != testIssuer || time.Unix(int64(c.Exp), 0).Before(fx.clock.now().Add(-time.Minute)) {
			t.Fatalf("accepted a wrong issuer or an expired token: %q", claims)
		}
		if p.OrganizationID != fx.org.ID || p.ClientID != fx.client.ID {
			t.Fatalf("accepted %q as %+v", claims, p)
		}
	})
}
