package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
)

// signInToMy signs a browser without JavaScript in to /my as nationalID
// through the test eID and returns it with the page it lands on.
func signInToMy(t *testing.T, in *flowdtest.Instance, nationalID string) (*formbrowser.Browser, formbrowser.Page) {
	t.Helper()
	b := formbrowser.New(t)
	b.Scope = in.URL
	form := b.Follow(http.MethodGet, in.URL+"/my/login?lang=en", nil)
	if !strings.Contains(form.Body, `name="national_id"`) {
		t.Fatalf("no test eID form at %s: %d %.2000s", form.URL, form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("national_id", nationalID)
	my := b.Follow(http.MethodPost, in.URL+"/idp/login", v)
	if my.Status != http.StatusOK || !strings.Contains(my.Body, "Every consent request addressed to you") {
		t.Fatalf("/my after the sign-in: %d %.2000s", my.Status, my.Body)
	}
	return b, my
}

// countRows is the count a query of the database at dbURL gives.
func countRows(t *testing.T, dbURL, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestThePersonsPageCannotFloodAnOrganization: a signed-in person who asks
// an organization twenty times to erase them has asked once: the pending
// request answers the others, and one subject.erasure_requested goes out;
// past the limit on the page's writes the page answers 429 with
// Retry-After. A hundred reloads of /my record one view in the
// organization's audit log; a view that shows other flows, or comes from
// another sign-in, is recorded again.
func TestThePersonsPageCannotFloodAnOrganization(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	o, c := createOrgWithClient(t, in, "Flooded Bank", "FLD")
	api := c.at(t, in)
	create := func() {
		t.Helper()
		if resp := call(t, api, "POST", in.URL+"/api/flows", `{"nationalId":"`+rightID+`","lastName":"Nordmann",`+
			`"redirectUrl":"https://bank.example/done"}`, nil); resp.StatusCode != 201 {
			t.Fatalf("create: %d", resp.StatusCode)
		}
	}
	create()
	b, my := signInToMy(t, in, rightID)
	form := my.HiddenFields(t)
	if form.Get("organization") != o.ID || form.Get("csrf") == "" {
		t.Fatalf("the erasure request form: %v", form)
	}
	var statuses []string
	for range 20 {
		p := b.Do(http.MethodPost, in.URL+"/my/erasure-requests", form)
		statuses = append(statuses, strconv.Itoa(p.Status))
		if p.Status == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || s < 1 || !strings.Contains(p.Body, "Try again in") {
				t.Fatalf("past the limit: Retry-After %q, %.500s", p.Header.Get("Retry-After"), p.Body)
			}
		}
	}
	if got := strings.Join(statuses, ","); got != strings.Repeat("303,", 10)+strings.TrimSuffix(strings.Repeat("429,", 10), ",") {
		t.Errorf("twenty requests to be erased answered %s, want ten 303 then 429", got)
	}
	if n := countRows(t, in.DatabaseURL, `select count(*) from erasure_requests where organization_id = $1`, o.ID); n != 1 {
		t.Errorf("%d erasure requests recorded, want 1", n)
	}
	if n := countRows(t, in.DatabaseURL, `select count(*) from events where organization_id = $1 and type = 'subject.erasure_requested'`, o.ID); n != 1 {
		t.Errorf("%d subject.erasure_requested events, want 1", n)
	}

	views := func() int {
		return countRows(t, in.DatabaseURL, `select count(*) from audit_log where organization_id = $1 and action = 'person_page.viewed'`, o.ID)
	}
	before := views()
	for range 100 {
		if p := b.Get(in.URL + "/my"); p.Status != http.StatusOK {
			t.Fatalf("/my: %d", p.Status)
		}
	}
	if n := views(); n != before {
		t.Errorf("a hundred reloads recorded %d more views, want none beyond the first of the sign-in", n-before)
	}
	create()
	b.Get(in.URL + "/my")
	if n := views(); n != before+1 {
		t.Errorf("a view of another flow recorded %d more views, want 1", n-before)
	}
	signInToMy(t, in, rightID)
	if n := views(); n != before+2 {
		t.Errorf("a view from another sign-in recorded %d more views, want 1", n-before-1)
	}
}
