// Package e2e drives the whole flowd binary — app.Run("serve") and its admin
// commands — over HTTP the way an organization's integration would.
package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

type org struct {
	ID            string `json:"id"`
	WebhookSecret string `json:"webhookSecret"`
}

type client struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

// receiver collects webhook deliveries whose signature verifies.
type receiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	events []map[string]any
	srv    *httptest.Server
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{t: t, secret: secret}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id, ts, sig := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature")
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.secret, "whsec_"))
		if err != nil {
			t.Errorf("webhook secret %q is not whsec_<base64>", r.secret)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "." + string(body)))
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if !strings.Contains(" "+sig+" ", " "+want+" ") {
			t.Errorf("webhook signature %q does not verify", sig)
			w.WriteHeader(400)
			return
		}
		openapitest.ValidateWebhook(t, req.Header, body)
		var ev map[string]any
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// waitFor waits until an event of type typ arrived and returns it.
func (r *receiver) waitFor(typ string) map[string]any {
	r.t.Helper()
	var found map[string]any
	testwait.For(r.t, "a "+typ+" webhook", func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, ev := range r.events {
			if ev["type"] == typ {
				found = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v", r.events)
	})
	return found
}

func createOrgAndClient(t *testing.T, in *flowdtest.Instance, name, prefix string) (org, *http.Client) {
	var o org
	if err := json.Unmarshal([]byte(in.CLI(t, "", "orgs", "create", "--name", name, "--prefix", prefix, "--org-number", "987654321", "--json")), &o); err != nil {
		t.Fatal(err)
	}
	var c client
	if err := json.Unmarshal([]byte(in.CLI(t, "", "clients", "create", "--org", o.ID, "--json")), &c); err != nil {
		t.Fatal(err)
	}
	cc := clientcredentials.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: in.URL + "/oauth/token"}
	// Every response, the token endpoint's included, must match the OpenAPI document.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, openapitest.Client(t))
	return o, cc.Client(ctx)
}

func call(t *testing.T, hc *http.Client, method, url, body string, out any) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp
}

func TestAnOrganizationsWholeIntegration(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	acme, api := createOrgAndClient(t, in, "Acme Bank", "ACME")
	_, otherAPI := createOrgAndClient(t, in, "Other Lender", "OTH")
	hooks := newReceiver(t, acme.WebhookSecret)

	var created struct {
		Links struct {
			Self    struct{ Href string } `json:"self"`
			Consent struct{ Href string } `json:"consent"`
		} `json:"_links"`
		FlowID      string `json:"flowId"`
		ReferenceID string `json:"referenceId"`
	}
	resp := call(t, api, "POST", in.URL+"/api/flows",
		`{"nationalId":"12345678901","lastName":"Nordmann","redirectUrl":"https://bank.example/done","webhookUrl":"`+hooks.srv.URL+`/hooks"}`, &created)
	if resp.StatusCode != 201 || resp.Header.Get("Location") != "/api/flows/"+created.FlowID || created.ReferenceID != "ACME-1" ||
		!strings.HasPrefix(created.Links.Consent.Href, in.URL+"/consent/") {
		t.Fatalf("create: %d %q %+v", resp.StatusCode, resp.Header.Get("Location"), created)
	}
	ev := hooks.waitFor("flow.created")
	data := ev["data"].(map[string]any)
	if data["flowId"] != created.FlowID || data["organizationId"] != acme.ID || data["status"] != "Unopened" || data["flowStatus"] != "active" {
		t.Fatalf("flow.created: %v", ev)
	}

	var got struct {
		Flow struct {
			FlowID  string `json:"flowId"`
			Status  string `json:"status"`
			Version int    `json:"version"`
			Data    struct {
				NationalID         string `json:"nationalId"`
				OrganizationNumber string `json:"organizationNumber"`
			} `json:"data"`
		} `json:"flow"`
	}
	if resp := call(t, api, "GET", in.URL+"/api/flows/"+created.FlowID, "", &got); resp.StatusCode != 200 ||
		got.Flow.Status != "active" || got.Flow.Version != 1 || got.Flow.Data.NationalID != "12345678901" || got.Flow.Data.OrganizationNumber != "987654321" {
		t.Fatalf("retrieve: %d %+v", resp.StatusCode, got)
	}
	if resp := call(t, otherAPI, "GET", in.URL+"/api/flows/"+created.FlowID, "", nil); resp.StatusCode != 404 {
		t.Fatalf("another organization sees the flow: %d", resp.StatusCode)
	}

	if resp := call(t, api, "POST", in.URL+"/api/flows/"+created.FlowID+"/cancel", "", nil); resp.StatusCode != 200 {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	hooks.waitFor("flow.cancelled")

	var deleted struct{ Status, FlowID, ReferenceID string }
	if resp := call(t, api, "DELETE", in.URL+"/api/flows/"+created.FlowID, "", &deleted); resp.StatusCode != 200 || deleted.Status != "deleted" {
		t.Fatalf("delete: %d %+v", resp.StatusCode, deleted)
	}
	hooks.waitFor("flow.deleted")
	if resp := call(t, api, "GET", in.URL+"/api/flows/"+created.FlowID, "", nil); resp.StatusCode != 404 {
		t.Fatalf("deleted flow still answers: %d", resp.StatusCode)
	}
}
