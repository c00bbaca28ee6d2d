package access_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestConsoleClientDPoP creates a client that must use DPoP from the
// new-client form, and turns the requirement off and on for another from
// the credentials page: each change is audited in its transaction (a broken
// audit log leaves the client as it was), asking for the setting a client
// has changes and records nothing, and viewers and other organizations'
// clients are refused.
func TestConsoleClientDPoP(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	org, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "DPoP Bank", ReferencePrefix: "DPB"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Other Bank", ReferencePrefix: "OTB"})
	if err != nil {
		t.Fatal(err)
	}
	ls.CreateStaff(t, org.ID, "ada", staff.RoleAdmin)
	ls.CreateStaff(t, org.ID, "vic", staff.RoleViewer)
	client, err := ls.Ident.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID, Name: "Backend"})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := ls.Ident.CreateClient(ctx, orgs.NewClient{OrganizationID: other.ID, Name: "Foreign"})
	if err != nil {
		t.Fatal(err)
	}
	admin := formbrowser.New(t)
	csrf := webtest.SignInStaff(t, admin, ls.URL, "ada", webtest.TestPassword).HiddenFields(t).Get("csrf")
	post := func(path string, form url.Values) formbrowser.Page {
		form.Set("csrf", csrf)
		return admin.Post(ls.URL+path, form)
	}
	bound := func(id string) bool {
		c, err := ls.Ident.Client(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.DPoPBound
	}
	dpopEntries := func() []string {
		log, _, err := ls.Ident.AuditLog(ctx, org.ID, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range log {
			if e.Action == identity.AuditClientDPoP || e.Action == identity.AuditClientCreate {
				out = append(out, e.Action+" "+e.Actor+" "+e.Target+": "+e.Detail)
			}
		}
		return out
	}

	if p := admin.Get(ls.URL + "/console/credentials/clients/new"); !strings.Contains(p.Body, `name="dpop"`) {
		t.Fatalf("the new-client form has no DPoP choice: %s", p.Body)
	}
	p := post("/console/credentials/clients", url.Values{"name": {"Bound"}, "scopes": {identity.ScopeFlowsRead}, "dpop": {"true"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", p.Status, p.Body)
	}
	if log := dpopEntries(); len(log) != 1 || !strings.Contains(log[0], "; DPoP required") {
		t.Fatalf("audit log after create: %q", log)
	}

	page := admin.Get(ls.URL + "/console/credentials").Body
	if !strings.Contains(page, "DPoP required") || !strings.Contains(page, "Require DPoP") || !strings.Contains(page, "Stop requiring DPoP") {
		t.Fatalf("the credentials page does not show both clients' DPoP state: %s", page)
	}

	path := "/console/credentials/clients/" + client.ID + "/dpop"
	mend := webtest.BreakAuditLog(t, ls.Pool)
	if p := post(path, url.Values{"dpop": {"on"}}); p.Status != http.StatusInternalServerError || bound(client.ID) {
		t.Fatalf("with the audit log broken: %d, bound %v", p.Status, bound(client.ID))
	}
	mend()

	tests := []struct {
		name    string
		path    string
		value   string
		status  int
		bound   bool
		entries int // client.dpop and client.create entries after
	}{
		{"require DPoP", path, "on", http.StatusSeeOther, true, 2},
		{"require it again", path, "on", http.StatusSeeOther, true, 2},
		{"stop requiring it", path, "off", http.StatusSeeOther, false, 3},
		{"a bad value", path, "yes", http.StatusBadRequest, false, 3},
		{"another organization's client", "/console/credentials/clients/" + foreign.ID + "/dpop", "on", http.StatusNotFound, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := post(tt.path, url.Values{"dpop": {tt.value}})
			if p.Status != tt.status || bound(client.ID) != tt.bound || len(dpopEntries()) != tt.entries {
				t.Fatalf("%d, bound %v, audit %q; want %d, %v, %d entries", p.Status, bound(client.ID), dpopEntries(), tt.status, tt.bound, tt.entries)
			}
		})
	}
	if bound(foreign.ID) {
		t.Fatal("another organization's client was changed")
	}
	if log := dpopEntries(); !strings.HasPrefix(log[0], "client.dpop staff:ada "+client.ID+": Backend; DPoP no longer required") {
		t.Fatalf("newest entry %q", log[0])
	}

	viewer := formbrowser.New(t)
	vcsrf := webtest.SignInStaff(t, viewer, ls.URL, "vic", webtest.TestPassword).HiddenFields(t).Get("csrf")
	if p := viewer.Post(ls.URL+path, url.Values{"csrf": {vcsrf}, "dpop": {"on"}}); p.Status != http.StatusForbidden || bound(client.ID) {
		t.Fatalf("a viewer: %d, bound %v", p.Status, bound(client.ID))
	}
	if strings.Contains(viewer.Get(ls.URL+"/console/credentials").Body, "Require DPoP") {
		t.Fatal("a viewer is offered the DPoP button")
	}
}
