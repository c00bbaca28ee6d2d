package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
)

// TestStaffSignInThroughTheBinary runs the real flowd serve: a staff account
// made with the CLI signs in to the console at the built-in provider, which
// the server discovers at its own address on first use.
func TestStaffSignInThroughTheBinary(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(in.CLI(t, "", "orgs", "create", "--name", "Demo Org", "--json")), &org); err != nil {
		t.Fatal(err)
	}
	out := in.CLI(t, "a sound long password\n", "staff", "create", "--org", org.ID, "--username", "admin@demo.example",
		"--role", "admin", "--password-stdin", "--json")
	var created struct{ ID, Username, Role string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Role != "admin" {
		t.Fatalf("staff create: %q %v", out, err)
	}

	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, in.URL+"/console", nil)
	if !strings.HasPrefix(form.URL, in.URL+"/idp/login?") {
		t.Fatalf("/console did not lead to the sign-in form: %s %d %s", form.URL, form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("username", "admin@demo.example")
	v.Set("password", "a sound long password")
	home := b.Follow(http.MethodPost, in.URL+"/idp/login", v)
	if home.URL != in.URL+"/console/flows" || !strings.Contains(home.Body, "Demo Org") {
		t.Fatalf("after sign-in: %s %d %s", home.URL, home.Status, home.Body)
	}
	if strings.Contains(in.Logs.String(), "a sound long password") {
		t.Fatal("the password appears in the logs")
	}

	out = in.CLI(t, "", "staff", "disable", "--username", "admin@demo.example")
	if !strings.Contains(out, "disabled") {
		t.Fatalf("staff disable: %q", out)
	}
}
