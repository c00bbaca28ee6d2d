package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestConsoleActionsCommitWithTheirAuditEntry drives the console's audited
// actions through the real server and modules while the audit log cannot be
// written, which must leave everything as it was and reveal nothing, and
// then once it can, which must leave both the change and one entry naming
// its target.
func TestConsoleActionsCommitWithTheirAuditEntry(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	webtest.CreateTestEvents(t, ls.Pool)
	org, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Audit Bank", ReferencePrefix: "AUD"})
	if err != nil {
		t.Fatal(err)
	}
	ls.CreateStaff(t, org.ID, "ada", staff.RoleAdmin)
	client, err := ls.Ident.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID, Name: "Backend"})
	if err != nil {
		t.Fatal(err)
	}
	caller := flows.Caller{OrganizationID: org.ID, ClientID: client.ID}
	newFlow := func(nationalID string) flows.Created {
		c, err := ls.Flows.Create(ctx, caller, flows.NewFlow{NationalID: nationalID, LastName: "Nordmann", RedirectURL: "https://bank.example/done"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	kept, doomed := newFlow("REVEAL-55501"), newFlow("DELETE-55502")
	const endpoint = "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d"
	webtest.InsertEndpoint(t, ls.Pool, org.ID, endpoint, "http://127.0.0.1:9/hooks", true)
	event := seedFlowEvent(t, ls.Pool, org.ID, kept.FlowID, 1, "failed")
	flow := func(t *testing.T, id string) (flows.Flow, bool) {
		f, err := ls.Flows.Get(ctx, caller, id)
		if errors.Is(err, flows.ErrNotFound) {
			return f, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return f, true
	}

	admin := formbrowser.New(t)
	csrf := webtest.SignInStaff(t, admin, ls.URL, "ada", webtest.TestPassword).HiddenFields(t).Get("csrf")
	if csrf == "" {
		t.Fatal("no CSRF token on the console's first page")
	}

	tests := []struct {
		name, path string
		form       url.Values
		action     string // what the audit log must record
		target     string // and the target it must name
		ok         int    // the status of the action when done
		shows      string // what the answer shows only when done
		done       func(t *testing.T) bool
	}{
		{"cancel", "/console/flows/" + kept.FlowID + "/cancel", nil, identity.AuditFlowCancel, kept.ReferenceID, http.StatusSeeOther, "",
			func(t *testing.T) bool { f, _ := flow(t, kept.FlowID); return f.ProcessStatus == flows.Cancelled }},
		{"delete", "/console/flows/" + doomed.FlowID + "/delete", nil, identity.AuditFlowDelete, doomed.ReferenceID, http.StatusSeeOther, "",
			func(t *testing.T) bool { _, found := flow(t, doomed.FlowID); return !found }},
		{"reveal the national id", "/console/flows/" + kept.FlowID + "/reveal", nil, identity.AuditFlowRevealNationalID, kept.ReferenceID,
			http.StatusOK, "REVEAL-55501", nil},
		{"create a client", "/console/credentials/clients", url.Values{"name": {"Reporting"}, "scopes": {identity.ScopeFlowsRead}},
			identity.AuditClientCreate, "", http.StatusCreated, "fcs_", func(t *testing.T) bool {
				cl, err := ls.Ident.ListClients(ctx, org.ID)
				if err != nil {
					t.Fatal(err)
				}
				return len(cl) == 2
			}},
		{"add keys to a client", "/console/credentials/clients/" + client.ID + "/keys", url.Values{"jwks": {string(testkeys.PublicJWKS(t, "k1", testkeys.EC(t)))}},
			identity.AuditClientKeys, client.ID, http.StatusSeeOther, "", func(t *testing.T) bool {
				cl, err := ls.Ident.Client(ctx, client.ID)
				if err != nil {
					t.Fatal(err)
				}
				return !cl.Keys.IsZero()
			}},
		{"revoke a client", "/console/credentials/clients/" + client.ID + "/revoke", nil, identity.AuditClientRevoke, client.ID,
			http.StatusSeeOther, "", func(t *testing.T) bool {
				cl, err := ls.Ident.Client(ctx, client.ID)
				if err != nil {
					t.Fatal(err)
				}
				return cl.Revoked()
			}},
		{"save settings", "/console/settings", url.Values{"reference_prefix": {"NEW"}, "organization_number": {"123"}},
			identity.AuditSettingsUpdate, "settings", http.StatusSeeOther, "", func(t *testing.T) bool {
				o, err := ls.Ident.Organization(ctx, org.ID)
				if err != nil {
					t.Fatal(err)
				}
				return o.ReferencePrefix == "NEW"
			}},
		{"recover an endpoint", "/console/webhooks/" + endpoint + "/recover", url.Values{"since": {time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")}},
			identity.AuditWebhookEndpointRecover, endpoint, http.StatusSeeOther, "", func(t *testing.T) bool {
				return countRows(t, ls.Pool, `select count(*) from webhook_recoveries`) == 1
			}},
		{"redeliver an event", "/console/flows/" + kept.FlowID + "/events/" + event + "/redeliver", nil, identity.AuditEventRedeliver, event,
			http.StatusSeeOther, "", func(t *testing.T) bool {
				return countRows(t, ls.Pool, `select count(*) from webhook_events where state = 'pending'`) == 1
			}},
	}
	post := func(t *testing.T, path string, form url.Values) formbrowser.Page {
		v := url.Values{"csrf": {csrf}}
		for k, vs := range form {
			v[k] = vs
		}
		return admin.Post(ls.URL+path, v)
	}
	entries := func(t *testing.T) []identity.AuditEntry {
		log, _, err := ls.Ident.AuditLog(ctx, org.ID, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		return log
	}

	mend := webtest.BreakAuditLog(t, ls.Pool)
	for _, tt := range tests {
		t.Run("audit log broken/"+tt.name, func(t *testing.T) {
			p := post(t, tt.path, tt.form)
			if p.Status != http.StatusInternalServerError {
				t.Errorf("status %d, want 500: %s", p.Status, p.Body)
			}
			if tt.shows != "" && strings.Contains(p.Body, tt.shows) {
				t.Errorf("the answer shows %q although nothing was recorded", tt.shows)
			}
			if tt.done != nil && tt.done(t) {
				t.Error("the action took effect although its audit entry was not written")
			}
		})
	}
	if log := entries(t); len(log) != 0 {
		t.Fatalf("the broken audit log has entries: %+v", log)
	}

	mend()
	for _, tt := range tests {
		t.Run("audit log working/"+tt.name, func(t *testing.T) {
			p := post(t, tt.path, tt.form)
			if p.Status != tt.ok {
				t.Fatalf("status %d, want %d: %s", p.Status, tt.ok, p.Body)
			}
			if tt.shows != "" && !strings.Contains(p.Body, tt.shows) {
				t.Errorf("the answer does not show %q", tt.shows)
			}
			if tt.done != nil && !tt.done(t) {
				t.Error("the action did not take effect")
			}
			var found []identity.AuditEntry
			for _, e := range entries(t) {
				if e.Action == tt.action {
					found = append(found, e)
				}
			}
			if len(found) != 1 || found[0].Actor != "staff:ada" || (tt.target != "" && found[0].Target != tt.target) || found[0].Target == "" {
				t.Errorf("entries of %s: %+v, want one by staff:ada naming %q", tt.action, found, tt.target)
			}
		})
	}
}
