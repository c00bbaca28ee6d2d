package formbrowser

import (
	"net/http"
	"strings"
	"testing"
)

// Consent opens a flowd consent link, proves the individual's identity
// through flowd's built-in test eID, answers decision ("accept" or
// "reject") and returns the redirect to the organization. A browser of its
// own is returned too, still signed in, for what the person does next on
// the link.
func Consent(t testing.TB, base, link, nationalID, decision string) (location string, b *Browser) {
	t.Helper()
	b = New(t)
	b.Scope = base // the journey ends at the redirect to the organization
	start := b.Follow(http.MethodGet, link, nil)
	if start.Status != 200 || strings.Contains(start.Body, nationalID) {
		t.Fatalf("consent page: %d (the national id must never show in full)", start.Status)
	}
	form := b.Follow(http.MethodGet, link+"/login", nil)
	if !strings.Contains(form.Body, `name="national_id"`) {
		t.Fatalf("no test eID form at %s: %d %.2000s", form.URL, form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("national_id", nationalID)
	decide := b.Follow(http.MethodPost, base+"/idp/login", v)
	if decide.Status != 200 || !strings.Contains(decide.Body, `name="_csrf"`) {
		t.Fatalf("decision page at %s: %d %.2000s", decide.URL, decide.Status, decide.Body)
	}
	d := decide.HiddenFields(t)
	d.Set("decision", decision)
	done := b.Post(link, d)
	if done.Status != http.StatusSeeOther {
		t.Fatalf("decision: %d %.2000s", done.Status, done.Body)
	}
	return done.Location, b
}
