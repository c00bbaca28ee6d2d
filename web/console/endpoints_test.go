package console_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

func TestConsoleWebhookEndpoints(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	s := ls.SignInStaffPair(t, "Hook Bank", "HOOK")
	org, other, admin, viewer, csrf, viewerCSRF := s.Org, s.Other, s.Admin, s.Viewer, s.AdminCSRF, s.ViewerCSRF
	list := func() []webhooks.Endpoint {
		t.Helper()
		l, err := ls.Srv.Deps.Endpoints.List(ctx, org.ID, webhooks.OldestFirst)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	// The page is in the navigation, next to Credentials, and starts empty.
	p := admin.Get(ls.URL + "/console/webhooks")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "No webhook endpoints yet") ||
		!strings.Contains(p.Body, `href="/console/credentials">Credentials</a><a href="/console/webhooks" aria-current="page">Webhooks</a>`) ||
		!strings.Contains(p.Body, `href="/console/webhooks/new"`) {
		t.Fatalf("empty page: %d %s", p.Status, p.Body)
	}

	// Add: bad fields come back beside their fields, with what was typed.
	p = admin.Post(ls.URL+"/console/webhooks", url.Values{"csrf": {csrf}, "url": {"http://10.0.0.7/hook"},
		"description": {"Loan \x07system"}, "event_types": {"flow.accepted", "flow.bogus"}, "enabled": {"true"}, "rate_limit": {"5000"}})
	if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `id="url-error"`) || !strings.Contains(p.Body, `id="description-error"`) ||
		!strings.Contains(p.Body, `id="rate_limit-error"`) ||
		!strings.Contains(p.Body, `id="event_types-error"`) || !strings.Contains(p.Body, `value="http://10.0.0.7/hook"`) ||
		!strings.Contains(p.Body, `value="flow.accepted" checked`) {
		t.Fatalf("bad fields: %d %s", p.Status, p.Body)
	}
	if len(list()) != 0 {
		t.Fatal("a refused form stored an endpoint")
	}
	p = admin.Post(ls.URL+"/console/webhooks", url.Values{"csrf": {csrf}, "url": {"https://hooks.hook.example/flowd"},
		"description": {"Loan system"}, "event_types": {"flow.rejected", "flow.accepted"}, "enabled": {"true"},
		"ordering": {"per-flow"}, "rate_limit": {"25"}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+"/console/webhooks?notice=endpoint_added") {
		t.Fatalf("add: %d %s %s", p.Status, p.Location, p.Body)
	}
	eps := list()
	if len(eps) != 1 || eps[0].URL != "https://hooks.hook.example/flowd" || !eps[0].Enabled ||
		!slices.Equal(eps[0].EventTypes, []webhooks.EventType{webhooks.FlowAccepted, webhooks.FlowRejected}) ||
		eps[0].Ordering != webhooks.PerFlow || eps[0].RateLimit != 25 {
		t.Fatalf("added %+v", eps)
	}
	id := eps[0].ID
	p = admin.Get(p.Location)
	if !strings.Contains(p.Body, "Webhook endpoint hooks.hook.example was added.") || !strings.Contains(p.Body, "flow.accepted, flow.rejected") ||
		!strings.Contains(p.Body, "Loan system") {
		t.Fatalf("list after adding: %s", p.Body)
	}
	// Viewers see it, without the admins' controls.
	p = viewer.Get(ls.URL + "/console/webhooks")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "https://hooks.hook.example/flowd") || strings.Contains(p.Body, "/console/webhooks/new") ||
		strings.Contains(p.Body, "/edit") || !strings.Contains(p.Body, "Only admins can add or change endpoints.") {
		t.Fatalf("viewer's list: %d %s", p.Status, p.Body)
	}

	// Edit: the form is filled in; every field is replaced; all events when none is ticked.
	p = admin.Get(ls.URL + "/console/webhooks/" + id + "/edit")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `value="https://hooks.hook.example/flowd"`) ||
		!strings.Contains(p.Body, `value="flow.rejected" checked`) || strings.Contains(p.Body, `value="flow.created" checked`) ||
		!strings.Contains(p.Body, `value="per-flow" checked`) || !strings.Contains(p.Body, `name="rate_limit" type="number" min="1" max="1000" inputmode="numeric" value="25"`) {
		t.Fatalf("edit form: %d %s", p.Status, p.Body)
	}
	p = admin.Post(ls.URL+"/console/webhooks/"+id, url.Values{"csrf": {csrf}, "url": {"https://v2.hook.example/"},
		"description": {"Everything"}, "enabled": {"true"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("save: %d %s", p.Status, p.Body)
	}
	if e := list()[0]; e.URL != "https://v2.hook.example/" || e.Description != "Everything" || len(e.EventTypes) != 0 || !e.Enabled ||
		e.Ordering != webhooks.Unordered || e.RateLimit != 0 {
		t.Fatalf("saved %+v", e)
	}
	if p := admin.Post(ls.URL+"/console/webhooks/"+id, url.Values{"csrf": {csrf}, "url": {"https://[::1]/"}, "enabled": {"true"}}); p.Status != http.StatusBadRequest ||
		!strings.Contains(p.Body, "Must be a public address") {
		t.Fatalf("save a loopback URL: %d %s", p.Status, p.Body)
	}

	// Disable, then enable, from the list.
	if p := admin.Post(ls.URL+"/console/webhooks/"+id+"/disable", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
		t.Fatalf("disable: %d %s", p.Status, p.Body)
	}
	if e := list()[0]; e.Enabled {
		t.Fatal("not disabled")
	}
	if p := admin.Get(ls.URL + "/console/webhooks"); !strings.Contains(p.Body, ">disabled</span>") || !strings.Contains(p.Body, `action="/console/webhooks/`+id+`/enable"`) {
		t.Fatalf("list of a disabled endpoint: %s", p.Body)
	}
	if p := admin.Post(ls.URL+"/console/webhooks/"+id+"/enable", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
		t.Fatalf("enable: %d %s", p.Status, p.Body)
	}
	if e := list()[0]; !e.Enabled {
		t.Fatal("not enabled")
	}

	// Viewers may not change anything, and no POST passes without its token.
	for _, c := range []struct{ method, path string }{
		{"GET", "/console/webhooks/new"}, {"POST", "/console/webhooks"}, {"GET", "/console/webhooks/" + id + "/edit"},
		{"POST", "/console/webhooks/" + id}, {"POST", "/console/webhooks/" + id + "/disable"}, {"POST", "/console/webhooks/" + id + "/enable"},
		{"GET", "/console/webhooks/" + id + "/delete"}, {"POST", "/console/webhooks/" + id + "/delete"},
	} {
		form := url.Values{"csrf": {viewerCSRF}, "url": {"https://viewer.example/"}, "enabled": {"false"}}
		if p := viewer.Do(c.method, ls.URL+c.path, form); p.Status != http.StatusForbidden {
			t.Errorf("a viewer's %s %s: %d", c.method, c.path, p.Status)
		}
		if c.method == "POST" {
			form.Del("csrf")
			if p := admin.Post(ls.URL+c.path, form); p.Status != http.StatusForbidden {
				t.Errorf("an admin's %s without the CSRF token: %d", c.path, p.Status)
			}
		}
	}
	if eps := list(); len(eps) != 1 || !eps[0].Enabled || eps[0].URL != "https://v2.hook.example/" {
		t.Fatalf("after the refused tries: %+v", eps)
	}

	// Another organization's endpoint is not there for these staff.
	foreign, err := ls.Srv.Deps.Endpoints.Create(ctx, other.ID, webhooks.NewEndpoint{URL: "https://other.example/", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/console/webhooks/" + foreign.ID + "/edit", "/console/webhooks/" + foreign.ID + "/delete", "/console/webhooks/nope/edit"} {
		if p := admin.Get(ls.URL + path); p.Status != http.StatusNotFound {
			t.Errorf("%s: %d", path, p.Status)
		}
	}
	for _, path := range []string{"/console/webhooks/" + foreign.ID + "/delete", "/console/webhooks/" + foreign.ID + "/disable"} {
		if p := admin.Post(ls.URL+path, url.Values{"csrf": {csrf}}); p.Status != http.StatusNotFound {
			t.Errorf("POST %s: %d", path, p.Status)
		}
	}
	if p := admin.Get(ls.URL + "/console/webhooks"); strings.Contains(p.Body, "other.example") {
		t.Fatal("another organization's endpoint is listed")
	}
	if e, err := ls.Srv.Deps.Endpoints.Get(ctx, other.ID, foreign.ID); err != nil || !e.Enabled {
		t.Fatalf("the other organization's endpoint: %+v %v", e, err)
	}

	// Delete, after a confirmation.
	if p := admin.Get(ls.URL + "/console/webhooks/" + id + "/delete"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Delete this webhook endpoint?") ||
		!strings.Contains(p.Body, "https://v2.hook.example/") {
		t.Fatalf("confirm: %d %s", p.Status, p.Body)
	}
	if len(list()) != 1 {
		t.Fatal("the confirmation page deleted")
	}
	if p := admin.Post(ls.URL+"/console/webhooks/"+id+"/delete", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther ||
		!strings.Contains(p.Location, "notice=endpoint_deleted") {
		t.Fatalf("delete: %d %s", p.Status, p.Body)
	}
	if len(list()) != 0 {
		t.Fatal("not deleted")
	}

	// Every change is in the audit log, by the admin.
	entries, _, err := ls.Ident.AuditLog(ctx, org.ID, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "webhook_endpoint.") {
			if e.Actor != "staff:ada" || e.Target != id {
				t.Errorf("entry %+v", e)
			}
			got = append(got, e.Action+" "+e.Detail)
		}
	}
	slices.Reverse(got)
	want := []string{
		"webhook_endpoint.create https://hooks.hook.example; flow.accepted flow.rejected; enabled",
		"webhook_endpoint.update url, description, eventTypes, ordering, rateLimit: https://v2.hook.example; all events; enabled",
		"webhook_endpoint.update disabled: https://v2.hook.example; all events; disabled",
		"webhook_endpoint.update enabled: https://v2.hook.example; all events; enabled",
		"webhook_endpoint.delete https://v2.hook.example; all events; enabled",
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
