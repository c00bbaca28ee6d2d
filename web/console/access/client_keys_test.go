package access_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestConsoleCreatesPrivateKeyJWTClients submits the new-client form with
// private_key_jwt: bad keys re-render the form with the error beside the
// field and create nothing; good keys make a client without a secret, listed
// with its method and without a secret rotation, audited without its keys.
func TestConsoleCreatesPrivateKeyJWTClients(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	org, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Key Bank", ReferencePrefix: "KEY"})
	if err != nil {
		t.Fatal(err)
	}
	ls.CreateStaff(t, org.ID, "ada", staff.RoleAdmin)
	admin := formbrowser.New(t)
	csrf := webtest.SignInStaff(t, admin, ls.URL, "ada", webtest.TestPassword).HiddenFields(t).Get("csrf")
	if p := admin.Get(ls.URL + "/console/credentials/clients/new"); !strings.Contains(p.Body, `value="private_key_jwt"`) || strings.Contains(p.Body, `name="jwks_uri"`) {
		t.Fatalf("the new-client form offers no private key JWT, or a jwks_uri without allowed hosts:\n%s", p.Body)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	private, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ec}}})
	post := func(path string, v url.Values) formbrowser.Page {
		v.Set("csrf", csrf)
		return admin.Post(ls.URL+path, v)
	}
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"no keys", url.Values{"auth": {"private_key_jwt"}}, "Paste the client&#39;s public keys"},
		{"a private key", url.Values{"auth": {"private_key_jwt"}, "jwks": {string(private)}}, "holds a private key"},
		{"a jwks_uri without allowed hosts", url.Values{"auth": {"private_key_jwt"}, "jwks_uri": {"https://keys.bank.example/jwks"}},
			"FLOWD_CLIENT_JWKS_HOSTS is empty"},
		{"an unknown method", url.Values{"auth": {"magic"}}, "Choose a client secret or private key JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("name", "Signer")
			tc.form.Set("scopes", identity.ScopeFlowsRead)
			p := post("/console/credentials/clients", tc.form)
			if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, tc.want) || !strings.Contains(p.Body, `class="field-error"`) {
				t.Fatalf("status %d, want 400 with %q:\n%s", p.Status, tc.want, p.Body)
			}
			if cl, _ := ls.Ident.ListClients(ctx, org.ID); len(cl) != 0 {
				t.Fatalf("a refused form created %+v", cl)
			}
		})
	}

	p := post("/console/credentials/clients", url.Values{"name": {"Signer"}, "scopes": {identity.ScopeFlowsRead},
		"auth": {"private_key_jwt"}, "jwks": {string(testkeys.PublicJWKS(t, "k1", testkeys.EC(t)))}})
	if p.Status != http.StatusCreated || strings.Contains(p.Body, "fcs_") || !strings.Contains(p.Body, "private_key_jwt") {
		t.Fatalf("creating a private_key_jwt client: %d\n%s", p.Status, p.Body)
	}
	clients, _ := ls.Ident.ListClients(ctx, org.ID)
	if len(clients) != 1 || clients[0].HasSecret || strings.Join(clients[0].AuthMethods(), " ") != identity.AuthPrivateKeyJWT {
		t.Fatalf("the created client: %+v", clients)
	}
	id := clients[0].ID
	list := admin.Get(ls.URL + "/console/credentials")
	if !strings.Contains(list.Body, "private key JWT") || strings.Contains(list.Body, id+"/rotate") || !strings.Contains(list.Body, id+"/keys") {
		t.Fatalf("the client list:\n%s", list.Body)
	}
	log, _, _ := ls.Ident.AuditLog(ctx, org.ID, 10, 0)
	if len(log) != 1 || log[0].Action != identity.AuditClientCreate || !strings.Contains(log[0].Detail, "auth private_key_jwt (keys given inline)") ||
		strings.Contains(log[0].Detail, "kty") {
		t.Fatalf("the audit log: %+v", log)
	}

	// The keys page shows the keys; bad ones are refused beside the field.
	if p := admin.Get(ls.URL + "/console/credentials/clients/" + id + "/keys"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Keys of Signer") ||
		!strings.Contains(p.Body, "&#34;kid&#34;: &#34;k1&#34;") {
		t.Fatalf("the keys page: %d\n%s", p.Status, p.Body)
	}
	if p := post("/console/credentials/clients/"+id+"/keys", url.Values{"jwks": {`{"keys":[]}`}}); p.Status != http.StatusBadRequest ||
		!strings.Contains(p.Body, "at least one key") {
		t.Fatalf("replacing with an empty set: %d\n%s", p.Status, p.Body)
	}
	if p := post("/console/credentials/clients/"+id+"/rotate", url.Values{}); p.Status != http.StatusConflict {
		t.Fatalf("rotating the secret of a client without one: %d", p.Status)
	}
}
