package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/formbrowser"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity"
)

// definitionForm is a valid publish form.
func definitionForm(csrf string, extra url.Values) url.Values {
	v := url.Values{"csrf": {csrf}, "title_en": {"Share your income"}, "title_nb": {"Del inntekten din"},
		"purpose_en": {"We check it.\n\n- Salary"}, "purpose_nb": {"Vi sjekker den.\n\n- Lønn"},
		"categories": {"Income | Inntekt"}, "validity": {"P90D"}, "level": {"high"}, "action": {"publish"}}
	for k, vs := range extra {
		v[k] = vs
	}
	return v
}

func TestConsoleDefinitions(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ctx := context.Background()
	org, err := ls.ident.CreateOrganization(ctx, identity.NewOrganization{Name: "Fjord Bank", ReferencePrefix: "FJB"})
	if err != nil {
		t.Fatal(err)
	}
	ls.createStaff(t, org.ID, "ada", identity.RoleAdmin)
	ls.createStaff(t, org.ID, "vic", identity.RoleViewer)
	admin, viewer := formbrowser.New(t), formbrowser.New(t)
	csrf := signInStaff(t, admin, ls.url, "ada", testPassword).HiddenFields(t).Get("csrf")
	viewerCSRF := signInStaff(t, viewer, ls.url, "vic", testPassword).HiddenFields(t).Get("csrf")
	latest := func(id string) consent.Published {
		p, err := ls.srv.definitions.Get(ctx, org.ID, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Everyone sees the list, with the default.
	for _, b := range []*formbrowser.Browser{admin, viewer} {
		if p := b.Get(ls.url + "/console/definitions"); p.Status != http.StatusOK || !strings.Contains(p.Body, "consent") ||
			!strings.Contains(p.Body, "default") {
			t.Fatalf("list: %d %s", p.Status, p.Body)
		}
	}
	// Viewers cannot publish or retire.
	for _, c := range []struct{ method, path string }{
		{"GET", "/console/definitions/new"}, {"GET", "/console/definitions/consent/publish"},
		{"POST", "/console/definitions"}, {"POST", "/console/definitions/consent/publish"}, {"POST", "/console/definitions/consent/retire"},
	} {
		if p := viewer.Do(c.method, ls.url+c.path, definitionForm(viewerCSRF, url.Values{"id": {"viewer-made"}})); p.Status != http.StatusForbidden {
			t.Errorf("a viewer's %s %s: %d", c.method, c.path, p.Status)
		}
	}
	// A POST without the CSRF token changes nothing.
	if p := admin.Post(ls.url+"/console/definitions", definitionForm("", url.Values{"id": {"no-token"}})); p.Status != http.StatusForbidden {
		t.Errorf("a POST without its token: %d", p.Status)
	}

	// Preview shows the consent page in both languages and stores nothing.
	p := admin.Post(ls.url+"/console/definitions", definitionForm(csrf, url.Values{"id": {"income"}, "action": {"preview"}}))
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Preview of the consent page") || !strings.Contains(p.Body, `lang="nb"`) ||
		!strings.Contains(p.Body, "Del inntekten din") || !strings.Contains(p.Body, "90 dager") || !strings.Contains(p.Body, "90 days") {
		t.Fatalf("preview: %d %s", p.Status, p.Body)
	}
	if _, err := ls.srv.definitions.Get(ctx, org.ID, "income", 0); err == nil {
		t.Fatal("the preview stored the definition")
	}
	// Bad fields come back beside their fields, with what was typed.
	p = admin.Post(ls.url+"/console/definitions", definitionForm(csrf, url.Values{"id": {"income"}, "title_en": {""},
		"purpose_nb": {strings.Repeat("x", 10001)}, "categories": {"Income without Norwegian"}, "validity": {"soon"}}))
	for _, want := range []string{`id="title_en-error"`, `id="purpose_nb-error"`, `id="categories-error"`, `id="validity-error"`, "Income without Norwegian"} {
		if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, want) {
			t.Errorf("bad fields: %d, the page lacks %s", p.Status, want)
		}
	}
	// Publish: a new definition, then its version 2.
	if p := admin.Post(ls.url+"/console/definitions", definitionForm(csrf, url.Values{"id": {"income"}})); p.Status != http.StatusSeeOther {
		t.Fatalf("create: %d %s", p.Status, p.Body)
	}
	if v := latest("income").Version; v.Version != 1 || v.PublishedBy != "staff:ada" || v.AssuranceLevel != consent.AssuranceHigh {
		t.Fatalf("created %+v", v)
	}
	if p := admin.Get(ls.url + "/console/definitions/income/publish"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Income | Inntekt") {
		t.Fatalf("the publish form is not filled in: %d %s", p.Status, p.Body)
	}
	if p := admin.Post(ls.url+"/console/definitions/income/publish", definitionForm(csrf, url.Values{"title_nb": {"Del inntekt og skatt"}})); p.Status != http.StatusSeeOther {
		t.Fatalf("publish: %d %s", p.Status, p.Body)
	}
	if got := latest("income"); got.Version.Version != 2 || got.Version.Title.NB != "Del inntekt og skatt" {
		t.Fatalf("published %+v", got.Version)
	}
	// Version 2 beside version 1: the Norwegian title changed, the English did not.
	p = viewer.Get(ls.url + "/console/definitions/income")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Version 1") || !strings.Contains(p.Body, "Del inntekten din") {
		t.Fatalf("version page: %d %s", p.Status, p.Body)
	}
	changed := func(label string) bool {
		i := strings.Index(p.Body, label)
		row := p.Body[strings.LastIndex(p.Body[:i], "<tr"):i]
		return strings.Contains(row, "changed")
	}
	if !changed("Title, Norwegian") || changed("Title, English") {
		t.Error("the changed field is not marked, or an unchanged one is")
	}
	if p := admin.Get(ls.url + "/console/definitions/income?version=9"); p.Status != http.StatusNotFound {
		t.Errorf("an unknown version: %d", p.Status)
	}

	// Retire, after a confirmation; the default has no retire.
	if p := admin.Get(ls.url + "/console/definitions/income/retire"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Retire income?") {
		t.Fatalf("confirm: %d", p.Status)
	}
	if p := admin.Post(ls.url+"/console/definitions/income/retire", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
		t.Fatalf("retire: %d %s", p.Status, p.Body)
	}
	if !latest("income").Definition.Retired() {
		t.Fatal("not retired")
	}
	if p := admin.Get(ls.url + "/console/definitions"); !strings.Contains(p.Body, "retired") {
		t.Error("the list does not show the retired definition as such")
	}
	if p := admin.Post(ls.url+"/console/definitions/income/publish", definitionForm(csrf, nil)); p.Status != http.StatusBadRequest ||
		!strings.Contains(p.Body, "retired") {
		t.Errorf("publishing to a retired definition: %d", p.Status)
	}
	if p := admin.Get(ls.url + "/console/definitions/consent"); strings.Contains(p.Body, "/retire") {
		t.Error("the default offers to retire")
	}
	if p := admin.Post(ls.url+"/console/definitions/consent/retire", url.Values{"csrf": {csrf}}); p.Status != http.StatusConflict {
		t.Errorf("retiring the default: %d", p.Status)
	}
	log, _, err := ls.ident.AuditLog(ctx, org.ID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range log {
		actions = append(actions, e.Action+" "+e.Target)
	}
	if got := strings.Join(actions, ","); got != "definition.retire income,definition.publish income,definition.create income" {
		t.Errorf("audit log %s", got)
	}
}
