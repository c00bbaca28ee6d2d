package e2e

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// consoleEnv is a running flowd with two organizations: Acme with an admin,
// a viewer and an API client, and Other with an admin and an API client.
type consoleEnv struct {
	in          *flowdtest.Instance
	acme, other org
	acmeAPI     *http.Client
	otherAPI    *http.Client
}

const staffPassword = "a long and careful passphrase"

// startConsole starts flowd with a short webhook retry schedule, so that a
// failing receiver opens an incident (on the third failed attempt) within a
// second; the fourth retry waits an hour, so the incident stays open.
func startConsole(t *testing.T) *consoleEnv {
	t.Helper()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_WEBHOOK_RETRY_SCHEDULE", "100ms,100ms,1h"))
	e := &consoleEnv{in: in}
	e.acme, e.acmeAPI = createOrgAndClient(t, in, "Acme Bank", "ACME")
	e.other, e.otherAPI = createOrgAndClient(t, in, "Other Lender", "OTH")
	e.staff(t, e.acme.ID, "ada@acme.example", "Ada Admin", "admin")
	e.staff(t, e.acme.ID, "vic@acme.example", "Vic Viewer", "viewer")
	e.staff(t, e.other.ID, "oscar@other.example", "Oscar Other", "admin")
	return e
}

func (e *consoleEnv) staff(t *testing.T, orgID, username, name, role string) {
	t.Helper()
	e.in.CLI(t, staffPassword, "staff", "create", "--org", orgID, "--username", username, "--name", name, "--role", role, "--password-stdin", "--json")
}

// newFlow is the answer of POST /api/flows.
type newFlow struct {
	FlowID      string `json:"flowId"`
	ReferenceID string `json:"referenceId"`
}

// createFlow creates a flow over the API; webhookURL may be empty.
func (e *consoleEnv) createFlow(t *testing.T, api *http.Client, nationalID, webhookURL string) newFlow {
	t.Helper()
	body := map[string]string{"nationalId": nationalID, "lastName": "Nordmann", "redirectUrl": "https://bank.example/done"}
	if webhookURL != "" {
		body["webhookUrl"] = webhookURL
	}
	raw, _ := json.Marshal(body)
	var out newFlow
	if resp := call(t, api, "POST", e.in.URL+"/api/flows", string(raw), &out); resp.StatusCode != 201 {
		t.Fatalf("create flow: %d", resp.StatusCode)
	}
	return out
}

// consoleAPIFlow is what the console tests read of GET /api/flows/{id}.
type consoleAPIFlow struct {
	Flow struct {
		Status       string         `json:"status"`
		HasIncidents bool           `json:"hasIncidents"`
		Incidents    map[string]any `json:"incidents"`
	} `json:"flow"`
}

// waitForFlow polls the API until cond holds for the flow.
func (e *consoleEnv) waitForFlow(t *testing.T, api *http.Client, flowID string, what string, cond func(consoleAPIFlow) bool) {
	t.Helper()
	testwait.For(t, "flow "+flowID+": "+what, func() (bool, string) {
		var f consoleAPIFlow
		resp := call(t, api, "GET", e.in.URL+"/api/flows/"+flowID, "", &f)
		return resp.StatusCode == 200 && cond(f), fmt.Sprintf("%d %+v", resp.StatusCode, f.Flow)
	})
}

// flakyReceiver answers webhooks with status, which a test may change.
type flakyReceiver struct {
	srv    *httptest.Server
	status atomic.Int32
	hits   atomic.Int32
	mu     sync.Mutex
	acked  map[string]int // the deliveries answered 2xx, by webhook-id
}

// ackedIDs returns how many deliveries of each webhook-id were answered 2xx.
func (r *flakyReceiver) ackedIDs() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.acked)
}

func newFlakyReceiver(t *testing.T, status int) *flakyReceiver {
	r := &flakyReceiver{acked: map[string]int{}}
	r.status.Store(int32(status))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.hits.Add(1)
		s := int(r.status.Load())
		if s >= 200 && s < 300 {
			r.mu.Lock()
			r.acked[req.Header.Get("webhook-id")]++
			r.mu.Unlock()
		}
		w.WriteHeader(s)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// tokenStatus asks the token endpoint for a token with the client's
// credentials and calls the API with it; it returns both statuses.
func tokenStatus(t *testing.T, base, clientID, secret string) (token string, tokenStatus int) {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
	resp, err := http.PostForm(base+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	return tok.AccessToken, resp.StatusCode
}

// apiStatus calls GET /api/flows with a bearer token.
func apiStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/flows", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// staffBrowser is a console user's browser: paths are relative to the
// server, and it keeps the session's CSRF token from the last console page,
// which post sends with each form.
type staffBrowser struct {
	t       *testing.T
	base    string
	browser *formbrowser.Browser
	csrf    string
}

func newStaffBrowser(t *testing.T, base string) *staffBrowser {
	return &staffBrowser{t: t, base: base, browser: formbrowser.New(t)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

// do sends one request without following a redirect.
func (b *staffBrowser) do(method, path string, form url.Values) formbrowser.Page {
	b.t.Helper()
	return b.keepCSRF(b.browser.Do(method, b.url(path), form))
}

// get follows redirects from path to a page.
func (b *staffBrowser) get(path string) formbrowser.Page {
	b.t.Helper()
	return b.keepCSRF(b.browser.Follow(http.MethodGet, b.url(path), nil))
}

// url makes a path absolute; a full URL (a resolved Location) stays as is.
func (b *staffBrowser) url(path string) string {
	if strings.HasPrefix(path, "/") {
		return b.base + path
	}
	return path
}

// keepCSRF remembers the CSRF token of a console page.
func (b *staffBrowser) keepCSRF(p formbrowser.Page) formbrowser.Page {
	if m := csrfField.FindStringSubmatch(p.Body); m != nil && strings.HasPrefix(p.URL, b.base+"/console") {
		b.csrf = html.UnescapeString(m[1])
	}
	return p
}

// post submits a console form with the session's CSRF token.
func (b *staffBrowser) post(path string, form url.Values) formbrowser.Page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	return b.do(http.MethodPost, path, form)
}

// signIn signs in through the built-in provider's staff form.
func (b *staffBrowser) signIn(username string) formbrowser.Page {
	b.t.Helper()
	form := b.get("/console")
	if !strings.Contains(form.Body, `name="password"`) {
		b.t.Fatalf("no staff sign-in form: %d %s", form.Status, form.Body)
	}
	v := form.HiddenFields(b.t)
	v.Set("username", username)
	v.Set("password", staffPassword)
	p := b.do(http.MethodPost, "/idp/login", v)
	if p.Status != http.StatusSeeOther {
		b.t.Fatalf("sign-in: %d %s", p.Status, p.Body)
	}
	return b.get(p.Location)
}
