package orgs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/testkit/testkeys"
)

func TestClientKeysValidate(t *testing.T) {
	t.Parallel()
	ec := testkeys.EC(t)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	private, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ec, KeyID: "p"}}})
	enc, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &ec.PublicKey, Use: "enc"}}})
	dup, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &ec.PublicKey, KeyID: "a"}, {Key: &testkeys.RSA().PublicKey, KeyID: "a"}}})
	var many jose.JSONWebKeySet
	for range MaxClientKeys + 1 {
		many.Keys = append(many.Keys, jose.JSONWebKey{Key: &ec.PublicKey})
	}
	manyJSON, _ := json.Marshal(many)
	hosts := []string{"keys.bank.example"}
	for _, tc := range []struct {
		name  string
		keys  ClientKeys
		field string // the field named, empty for valid keys
		msg   string
	}{
		{"inline", ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"a": ec, "b": testkeys.RSA()})}, "", ""},
		{"uri", ClientKeys{JWKSURI: "https://keys.bank.example/jwks.json"}, "", ""},
		{"both", ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"a": ec}), JWKSURI: "https://keys.bank.example/jwks.json"}, "jwksUri", "not both"},
		{"private key", ClientKeys{JWKS: private}, "jwks", `private member "d"`},
		{"P-384", ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"a": p384})}, "jwks", "P-256"},
		{"RSA 1024", ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"a": small})}, "jwks", "1024 bits"},
		{"use enc", ClientKeys{JWKS: enc}, "jwks", `use "enc"`},
		{"duplicate kid", ClientKeys{JWKS: dup}, "jwks", `key 2: kid "a"`},
		{"too many", ClientKeys{JWKS: manyJSON}, "jwks", "at most 10"},
		{"symmetric", ClientKeys{JWKS: []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)}, "jwks", `private member "k"`},
		{"not a set", ClientKeys{JWKS: []byte(`[1]`)}, "jwks", "JSON Web Key Set"},
		{"empty set", ClientKeys{JWKS: []byte(`{"keys":[]}`)}, "jwks", "at least one"},
		{"http", ClientKeys{JWKSURI: "http://keys.bank.example/jwks.json"}, "jwksUri", "https"},
		{"host not allowed", ClientKeys{JWKSURI: "https://evil.example/jwks.json"}, "jwksUri", "FLOWD_CLIENT_JWKS_HOSTS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.keys.Validate(hosts)
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e, ok := apperr.As(err)
			if !ok || len(e.Fields) != 1 || e.Fields[0].Field != tc.field || !strings.Contains(e.Fields[0].Message, tc.msg) {
				t.Fatalf("got %v, want %s: …%s…", err, tc.field, tc.msg)
			}
		})
	}
	if err := (&ClientKeys{JWKSURI: "https://keys.bank.example/jwks.json"}).Validate(nil); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatal("a jwks_uri was accepted with no allowed host")
	}
}

func TestCreateClientCredentials(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	jwks := testkeys.JWKS(t, map[string]any{"k": testkeys.EC(t)})
	both, err := f.m.CreateClient(ctx, NewClient{OrganizationID: f.org.ID, Keys: ClientKeys{JWKS: jwks}, AlsoSecret: true})
	if err != nil || both.Secret == "" || strings.Join(both.AuthMethods(), " ") != "client_secret_basic client_secret_post private_key_jwt" {
		t.Fatalf("a client with keys and a secret: %+v %v", both, err)
	}
	if strings.Join(f.client.AuthMethods(), " ") != "client_secret_basic client_secret_post" {
		t.Fatalf("a secret client's methods: %v", f.client.AuthMethods())
	}
	_, err = f.m.CreateClient(ctx, NewClient{OrganizationID: f.org.ID, Name: strings.Repeat("x", 201), Keys: ClientKeys{JWKS: []byte("{")}})
	if e, ok := apperr.As(err); !ok || len(e.Fields) != 2 {
		t.Fatalf("every bad field at once: %v", err)
	}
	// A bad replacement changes nothing; another organization's client is not found.
	if _, err := f.m.ReplaceClientKeys(ctx, f.org.ID, both.ID, ClientKeys{JWKS: []byte(`{"keys":[]}`)}); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("bad keys: %v", err)
	}
	if _, err := f.m.ReplaceClientKeys(ctx, "00000000-0000-0000-0000-000000000000", both.ID, ClientKeys{JWKS: jwks}); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("another organization: %v", err)
	}
	got, _ := f.m.Client(ctx, both.ID)
	if !strings.Contains(string(got.Keys.JWKS), `"kid": "k"`) || !got.HasSecret {
		t.Fatalf("after refused replacements: %s", got.Keys.JWKS)
	}
}
