package app_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/flowdtest"
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

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	get := func(u string) (*http.Response, string) {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get(in.URL + "/console")
	if !strings.HasPrefix(resp.Request.URL.String(), in.URL+"/idp/login?") {
		t.Fatalf("/console did not lead to the sign-in form: %s %d %s", resp.Request.URL, resp.StatusCode, body)
	}
	form := url.Values{"username": {"admin@demo.example"}, "password": {"a sound long password"}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	resp, err := client.PostForm(in.URL+"/idp/login", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.String() != in.URL+"/console/flows" || !strings.Contains(string(b), "Demo Org") {
		t.Fatalf("after sign-in: %s %d %s", resp.Request.URL, resp.StatusCode, b)
	}
	if strings.Contains(in.Logs.String(), "a sound long password") {
		t.Fatal("the password appears in the logs")
	}

	out = in.CLI(t, "", "staff", "disable", "--username", "admin@demo.example")
	if !strings.Contains(out, "disabled") {
		t.Fatalf("staff disable: %q", out)
	}
}
