package console_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
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

// previewIn returns the preview of the consent page in lang from a form
// page, or "" when the page has none.
func previewIn(body, lang string) string {
	_, preview, ok := strings.Cut(body, `<section class="preview">`)
	if !ok {
		return ""
	}
	_, text, ok := strings.Cut(preview, `<div class="consent-preview" lang="`+lang+`">`)
	if !ok {
		return ""
	}
	text, _, _ = strings.Cut(text, `<div class="consent-preview"`)
	return text
}

// rowOf returns the table row of a version page whose heading is label.
func rowOf(t *testing.T, body, label string) string {
	t.Helper()
	i := strings.Index(body, label)
	if i < 0 {
		t.Fatalf("no row %q in %s", label, body)
	}
	start := strings.LastIndex(body[:i], "<tr")
	end := strings.Index(body[i:], "</tr>")
	return body[start : i+end]
}

// between reports whether want comes after the element with id from and
// before the one with id to: next to its field.
func between(body, want, from, to string) bool {
	i, j, k := strings.Index(body, `id="`+from+`"`), strings.Index(body, want), strings.Index(body, `id="`+to+`"`)
	return i >= 0 && i < j && j < k
}

func TestConsoleDefinitions(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	org, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Fjord Bank", ReferencePrefix: "FJB"})
	if err != nil {
		t.Fatal(err)
	}
	ls.CreateStaff(t, org.ID, "ada", staff.RoleAdmin)
	ls.CreateStaff(t, org.ID, "vic", staff.RoleViewer)
	admin, viewer := formbrowser.New(t), formbrowser.New(t)
	csrf := webtest.SignInStaff(t, admin, ls.URL, "ada", webtest.TestPassword).HiddenFields(t).Get("csrf")
	viewerCSRF := webtest.SignInStaff(t, viewer, ls.URL, "vic", webtest.TestPassword).HiddenFields(t).Get("csrf")
	latest := func(id string) consent.Published {
		t.Helper()
		p, err := ls.Srv.Deps.Definitions.Get(ctx, org.ID, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Everyone sees the list, with the default.
	for _, b := range []*formbrowser.Browser{admin, viewer} {
		if p := b.Get(ls.URL + "/console/definitions"); p.Status != http.StatusOK || !strings.Contains(p.Body, "consent") ||
			!strings.Contains(p.Body, "default") {
			t.Fatalf("list: %d %s", p.Status, p.Body)
		}
	}
	// Viewers cannot publish or retire.
	for _, c := range []struct{ method, path string }{
		{"GET", "/console/definitions/new"}, {"GET", "/console/definitions/consent/publish"}, {"GET", "/console/definitions/consent/retire"},
		{"POST", "/console/definitions"}, {"POST", "/console/definitions/consent/publish"}, {"POST", "/console/definitions/consent/retire"},
	} {
		if p := viewer.Do(c.method, ls.URL+c.path, definitionForm(viewerCSRF, url.Values{"id": {"viewer-made"}})); p.Status != http.StatusForbidden {
			t.Errorf("a viewer's %s %s: %d", c.method, c.path, p.Status)
		}
	}
	// A POST without the CSRF token changes nothing.
	for _, path := range []string{"/console/definitions", "/console/definitions/consent/publish", "/console/definitions/consent/retire"} {
		if p := admin.Post(ls.URL+path, definitionForm("", url.Values{"id": {"no-token"}})); p.Status != http.StatusForbidden {
			t.Errorf("a POST to %s without its token: %d", path, p.Status)
		}
	}
	if d := latest(consent.DefaultDefinitionID); d.Version.Version != 1 || d.Definition.Retired() {
		t.Errorf("a POST without its token changed the default: %+v", d)
	}
	if _, err := ls.Srv.Deps.Definitions.Get(ctx, org.ID, "no-token", 0); err == nil {
		t.Error("a POST without its token created a definition")
	}

	// Preview shows the consent page in both languages and stores nothing.
	p := admin.Post(ls.URL+"/console/definitions", definitionForm(csrf, url.Values{"id": {"income"}, "action": {"preview"}}))
	if en, nb := previewIn(p.Body, "en"), previewIn(p.Body, "nb"); p.Status != http.StatusOK ||
		!strings.Contains(en, "Share your income") || !strings.Contains(en, "90 days") || !strings.Contains(en, "<li>Salary</li>") ||
		!strings.Contains(nb, "Del inntekten din") || !strings.Contains(nb, "90 dager") || !strings.Contains(nb, "<li>Lønn</li>") {
		t.Fatalf("preview: %d %s", p.Status, p.Body)
	}
	if _, err := ls.Srv.Deps.Definitions.Get(ctx, org.ID, "income", 0); err == nil {
		t.Fatal("the preview stored the definition")
	}
	// Bad fields come back beside their fields, with what was typed.
	longPurpose := strings.Repeat("x", consent.MaxText+1)
	p = admin.Post(ls.URL+"/console/definitions", definitionForm(csrf, url.Values{"id": {"income"}, "title_en": {""},
		"purpose_nb": {longPurpose}, "categories": {"Income without Norwegian\n" + strings.Repeat("y", consent.MaxCategory+1) + " | Lang"},
		"validity": {"soon"}}))
	if p.Status != http.StatusBadRequest {
		t.Fatalf("bad fields: %d", p.Status)
	}
	for _, c := range []struct{ want, from, to string }{
		{`id="title_en-error"`, "title_en", "purpose_en"},
		{`id="purpose_nb-error"`, "purpose_nb", "categories"},
		{"Category 1: write it as English | Norsk.", "categories", "recipient"},
		{"Category 2, English: must be at most 200 characters.", "categories", "recipient"},
		{`id="validity-error"`, "validity", "level"},
		{"Del inntekten din", "title_nb", "purpose_nb"},
		{longPurpose, "purpose_nb", "categories"},
		{"Income without Norwegian", "categories", "recipient"},
	} {
		if !between(p.Body, c.want, c.from, c.to) {
			t.Errorf("bad fields: %.40q is not beside %s", c.want, c.from)
		}
	}
	if strings.Contains(p.Body, "Category 1, Norwegian") {
		t.Error("a category line without | is also reported as a missing Norwegian name")
	}
	// Publish: a new definition; its version 1 stands alone, its purpose in
	// paragraphs and lists.
	if p := admin.Post(ls.URL+"/console/definitions", definitionForm(csrf, url.Values{"id": {"income"}})); p.Status != http.StatusSeeOther ||
		p.Location != ls.URL+"/console/definitions/income?version=1" {
		t.Fatalf("create: %d %s %s", p.Status, p.Location, p.Body)
	}
	if v := latest("income").Version; v.Version != 1 || v.PublishedBy != "staff:ada" || v.AssuranceLevel != assurance.High {
		t.Fatalf("created %+v", v)
	}
	p = viewer.Get(ls.URL + "/console/definitions/income?version=1")
	if p.Status != http.StatusOK || strings.Count(p.Body, "<th>Version ") != 1 || strings.Contains(p.Body, "changed") {
		t.Fatalf("version 1 does not stand alone: %d %s", p.Status, p.Body)
	}
	if latest("income").Version.Recipient == "" {
		t.Fatal("a version without a recipient")
	}
	for label, want := range map[string]string{"Purpose, English": "We check it.</p><ul><li>Salary</li></ul>",
		"Data it covers": "<li>Income | Inntekt</li>", "Valid for": "P90D", "eID level": "high", "Published": "by staff:ada",
		"Text SHA-256": hex.EncodeToString(latest("income").Version.TextSHA256), "Recipient": ">" + latest("income").Version.Recipient + "</td>"} {
		if row := rowOf(t, p.Body, label); !strings.Contains(row, want) {
			t.Errorf("%s: no %s in %s", label, want, row)
		}
	}
	if p := admin.Get(ls.URL + "/console/definitions/income/publish"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Income | Inntekt") {
		t.Fatalf("the publish form is not filled in: %d %s", p.Status, p.Body)
	}
	// A preview of the next version leaves the latest as it was.
	p = admin.Post(ls.URL+"/console/definitions/income/publish", definitionForm(csrf, url.Values{"title_nb": {"Del inntekt og skatt"}, "action": {"preview"}}))
	if p.Status != http.StatusOK || !strings.Contains(previewIn(p.Body, "en"), "Share your income") || !strings.Contains(previewIn(p.Body, "nb"), "Del inntekt og skatt") {
		t.Fatalf("preview of version 2: %d %s", p.Status, p.Body)
	}
	if v := latest("income").Version; v.Version != 1 || v.Title.NB != "Del inntekten din" {
		t.Fatalf("the preview published %+v", v)
	}
	if p := admin.Post(ls.URL+"/console/definitions/income/publish", definitionForm(csrf, url.Values{"title_nb": {"Del inntekt og skatt"}})); p.Status != http.StatusSeeOther ||
		p.Location != ls.URL+"/console/definitions/income?version=2" {
		t.Fatalf("publish: %d %s %s", p.Status, p.Location, p.Body)
	}
	if got := latest("income"); got.Version.Version != 2 || got.Version.Title.NB != "Del inntekt og skatt" {
		t.Fatalf("published %+v", got.Version)
	}
	// Version 2 beside version 1: the Norwegian title changed, the English did not.
	p = viewer.Get(ls.URL + "/console/definitions/income")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "<th>Version 2</th>") || !strings.Contains(p.Body, "<th>Version 1</th>") ||
		!strings.Contains(p.Body, `href="/console/definitions/income?version=1"`) {
		t.Fatalf("version page: %d %s", p.Status, p.Body)
	}
	if row := rowOf(t, p.Body, "Title, Norwegian"); !strings.Contains(row, "changed") || !strings.Contains(row, "Del inntekt og skatt") ||
		!strings.Contains(row, "Del inntekten din") {
		t.Errorf("the changed field is not marked with both values: %s", row)
	}
	if row := rowOf(t, p.Body, "Title, English"); strings.Contains(row, "changed") {
		t.Errorf("an unchanged field is marked: %s", row)
	}
	for _, path := range []string{"/console/definitions/income?version=9", "/console/definitions/income?version=0",
		"/console/definitions/income?version=two", "/console/definitions/nothing", "/console/definitions/nothing/publish",
		"/console/definitions/nothing/retire"} {
		if p := admin.Get(ls.URL + path); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "There is nothing here") {
			t.Errorf("%s: %d", path, p.Status)
		}
	}

	// Retire, after a confirmation; the default has no retire.
	if p := admin.Get(ls.URL + "/console/definitions/income/retire"); p.Status != http.StatusOK || !strings.Contains(p.Body, "Retire income?") {
		t.Fatalf("confirm: %d", p.Status)
	}
	if latest("income").Definition.Retired() {
		t.Fatal("the confirmation page retired")
	}
	if p := admin.Post(ls.URL+"/console/definitions/income/retire", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
		t.Fatalf("retire: %d %s", p.Status, p.Body)
	}
	if !latest("income").Definition.Retired() {
		t.Fatal("not retired")
	}
	if row := rowOf(t, admin.Get(ls.URL+"/console/definitions").Body, "<code>income</code>"); !strings.Contains(row, "retired") {
		t.Errorf("the list does not show the retired definition as such: %s", row)
	}
	if p := admin.Post(ls.URL+"/console/definitions/income/publish", definitionForm(csrf, nil)); p.Status != http.StatusBadRequest ||
		!strings.Contains(p.Body, "retired") || !strings.Contains(p.Body, "Del inntekten din") {
		t.Errorf("publishing to a retired definition: %d", p.Status)
	}
	if p := admin.Get(ls.URL + "/console/definitions/consent"); p.Status != http.StatusOK || strings.Contains(p.Body, "/retire") {
		t.Error("the default offers to retire")
	}
	if p := admin.Post(ls.URL+"/console/definitions/consent/retire", url.Values{"csrf": {csrf}}); p.Status != http.StatusConflict {
		t.Errorf("retiring the default: %d", p.Status)
	}
	if latest(consent.DefaultDefinitionID).Definition.Retired() {
		t.Error("the default was retired")
	}
	log, _, err := ls.Ident.AuditLog(ctx, org.ID, 10, 0)
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
