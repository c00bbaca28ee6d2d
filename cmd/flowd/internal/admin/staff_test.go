package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity/staff"
)

func TestStaffCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t), "FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey,
		"FLOWD_PASSWORD_HASH": flowdtest.TestPasswordHash}
	getenv := func(k string) string { return env[k] }
	run := func(stdin string, args ...string) (string, error) { return flowdtest.RunCLI(getenv, stdin, args...) }
	orgOut, err := run("", "orgs", "create", "--name", "Org One", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(orgOut), &org); err != nil {
		t.Fatal(err)
	}
	if _, err := run("a long enough password\n", "staff", "create", "--org", "no-such-org", "--username", "eve",
		"--role", "admin", "--password-stdin"); err == nil || !strings.Contains(err.Error(), "No organization") {
		t.Fatalf("staff create for an unknown organization: %v", err)
	}

	out, err := run("a long enough password\n", "staff", "create", "--org", org.ID, "--username", "Ada@Example.com",
		"--role", "admin", "--password-stdin", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID, Username, Role string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.ID == "" || created.Username != "ada@example.com" || created.Role != "admin" {
		t.Fatalf("create --json: %q (%v)", out, err)
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("--json printed more than one line: %q", out)
	}

	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string // in the error, or in stdout when it succeeds
		fails bool
	}{
		{"taken username, any case", "another long password", []string{"staff", "create", "--org", org.ID, "--username", "ADA@example.com", "--role", "viewer", "--password-stdin"}, "exists already", true},
		{"unknown role", "another long password", []string{"staff", "create", "--org", org.ID, "--username", "bob", "--role", "owner", "--password-stdin"}, "--role", true},
		{"short password", "short", []string{"staff", "create", "--org", org.ID, "--username", "bob", "--role", "viewer", "--password-stdin"}, "--password", true},
		{"no organization", "another long password", []string{"staff", "create", "--username", "bob", "--role", "viewer", "--password-stdin"}, "--org", true},
		{"password on no stdin flag", "", []string{"staff", "create", "--org", "o", "--username", "bob", "--role", "viewer"}, "--password-stdin", true},
		{"reset", "a brand new password", []string{"staff", "reset-password", "--username", "ada@example.com", "--password-stdin"}, "new password", false},
		{"reset unknown", "a brand new password", []string{"staff", "reset-password", "--username", "nobody", "--password-stdin"}, "No staff account", true},
		{"disable", "", []string{"staff", "disable", "--username", "ada@example.com", "--json"}, `"disabled":true`, false},
		{"disable unknown", "", []string{"staff", "disable", "--username", "nobody"}, "No staff account", true},
		{"unknown subcommand", "", []string{"staff", "promote"}, "promote", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(tt.stdin, tt.args...)
			if tt.fails {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("want an error with %q, got %v (out %q)", tt.want, err, out)
				}
				return
			}
			if err != nil || !strings.Contains(out, tt.want) {
				t.Fatalf("want %q in %q (%v)", tt.want, out, err)
			}
		})
	}
}

// consoleBrowser is a browser signed in to in's console as username, and
// copies of its console and provider cookies in two other browsers.
type consoleBrowser struct {
	b, consoleCopy, providerCopy *formbrowser.Browser
	csrf                         string
}

func signInConsole(t *testing.T, in *flowdtest.Instance, username string) consoleBrowser {
	t.Helper()
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, in.URL+"/console", nil)
	v := form.HiddenFields(t)
	v.Set("username", username)
	v.Set("password", "a long enough password")
	home := b.Follow(http.MethodPost, in.URL+"/idp/login", v)
	if home.Status != http.StatusOK || !strings.Contains(home.Body, "Sign out") {
		t.Fatalf("%s did not sign in: %d %s", username, home.Status, home.Body)
	}
	u, _ := url.Parse(in.URL)
	copyOf := func(name string) *formbrowser.Browser {
		c := formbrowser.New(t)
		for _, ck := range b.Jar().Cookies(u) {
			if ck.Name == name {
				c.Jar().SetCookies(u, []*http.Cookie{{Name: name, Value: ck.Value, Path: "/"}})
			}
		}
		return c
	}
	return consoleBrowser{b: b, consoleCopy: copyOf("flowd_console"), providerCopy: copyOf("flowd_idp"), csrf: home.HiddenFields(t).Get("csrf")}
}

// refused fails the test unless the browser and the copies of its cookies
// are all signed out: a console page goes to sign-in, a POST is 401, and
// the provider asks for the password.
func (cb consoleBrowser) refused(t *testing.T, in *flowdtest.Instance, after string) {
	t.Helper()
	for _, b := range []*formbrowser.Browser{cb.b, cb.consoleCopy} {
		if p := b.Get(in.URL + "/console/flows"); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, in.URL+"/console/auth/login") {
			t.Fatalf("after %s, a console page: %d %s", after, p.Status, p.Location)
		}
	}
	if p := cb.consoleCopy.Post(in.URL+"/console/settings", url.Values{"csrf": {cb.csrf}, "reference_prefix": {"PWNED"}}); p.Status != http.StatusUnauthorized {
		t.Fatalf("after %s, a POST with the copied console cookie: %d", after, p.Status)
	}
	if p := cb.providerCopy.Follow(http.MethodGet, in.URL+"/console", nil); !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("after %s, the copied provider cookie signed in: %s %s", after, p.URL, p.Body)
	}
}

// TestStaffCommandsEndSessions: against a running flowd, `staff sessions`
// lists a person's sessions, and reset-password, set-role, disable,
// end-sessions and delete end them at once: the browser and copies of its
// cookies are refused. Each end is in the audit log, by the operator.
func TestStaffCommandsEndSessions(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	orgID := in.CLIJSON(t, "orgs", "create", "--name", "Session Bank")["id"].(string)
	for _, u := range []string{"ada", "bob"} {
		in.CLI(t, "a long enough password\n", "staff", "create", "--org", orgID, "--username", u, "--role", "admin", "--password-stdin")
	}
	signInConsole(t, in, "ada")
	ada := signInConsole(t, in, "ada")

	listed := in.CLIJSON(t, "staff", "sessions", "--username", "ada")
	sessions, _ := listed["sessions"].([]any)
	if len(sessions) != 4 {
		t.Fatalf("staff sessions: %v, want two sign-ins' console and provider sessions", listed)
	}
	first, _ := sessions[0].(map[string]any)
	if first["userAgent"] != "Go-http-client" || first["address"] != "127.0.0.1" || first["kind"] == "" || first["startedAt"] == "" {
		t.Fatalf("a listed session: %v", first)
	}
	if out := in.CLI(t, "", "staff", "sessions", "--username", "ada"); !strings.Contains(out, "4 live session(s) of ada") {
		t.Fatalf("staff sessions: %q", out)
	}

	steps := []struct {
		name  string
		stdin string
		args  []string
		ended float64
	}{
		{"reset-password", "another long password\n", []string{"staff", "reset-password", "--username", "ada", "--password-stdin"}, 4},
		{"set-role", "", []string{"staff", "set-role", "--username", "ada", "--role", "viewer"}, 2},
		{"disable", "", []string{"staff", "disable", "--username", "ada"}, 2},
	}
	for i, st := range steps {
		if i > 0 {
			ada = signInConsole(t, in, "ada")
		}
		out, err := flowdtest.RunCLI(in.Getenv, st.stdin, append(st.args, "--json")...)
		var got map[string]any
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["sessionsEnded"] != st.ended {
			t.Fatalf("%s: %q (%v), want %v sessions ended", st.name, out, err, st.ended)
		}
		ada.refused(t, in, st.name)
		if i == 0 {
			// The new password signs in again.
			in.CLI(t, "a long enough password\n", "staff", "reset-password", "--username", "ada", "--password-stdin")
		}
	}
	if del := in.CLIJSON(t, "staff", "delete", "--username", "ada"); del["deleted"] != true || del["sessionsEnded"] != 0.0 {
		t.Fatalf("staff delete: %v", del)
	}
	if _, err := flowdtest.RunCLI(in.Getenv, "", "staff", "sessions", "--username", "ada"); err == nil || !strings.Contains(err.Error(), "No staff account") {
		t.Fatalf("sessions of a deleted account: %v", err)
	}

	bob := signInConsole(t, in, "bob")
	if ended := in.CLIJSON(t, "staff", "end-sessions", "--username", "bob"); ended["sessionsEnded"] != 2.0 {
		t.Fatalf("staff end-sessions: %v", ended)
	}
	bob.refused(t, in, "end-sessions")

	audit := strings.Join(operatorAudit(t, in), "\n")
	for _, want := range []string{"staff.reset_password ada: role admin; 4 session(s) ended", "staff.set_role ada: role viewer; 2 session(s) ended",
		"staff.disable ada: role viewer; 2 session(s) ended", "staff.delete ada: role viewer; 0 session(s) ended"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %q:\n%s", want, audit)
		}
	}
	for why, n := range map[string]int{staff.EndedByPasswordReset: 4, staff.EndedByRoleChange: 2, staff.EndedByDisable: 2, staff.EndedByOperator: 2} {
		if got := strings.Count(audit, ": "+why); got != n {
			t.Errorf("%d session.end entries for %q, want %d:\n%s", got, why, n, audit)
		}
	}
}

// TestStaffPasswordsTakeTheConfiguredCost: FLOWD_PASSWORD_HASH sets the
// argon2id cost of the passwords staff create stores, and without it the
// default's.
func TestStaffPasswordsTakeTheConfiguredCost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ setting, want string }{
		{"", "$argon2id$v=19$m=65536,t=3,p=2$"},
		{"m=19456,t=2,p=1", "$argon2id$v=19$m=19456,t=2,p=1$"},
	} {
		url := dbtest.NewURL(t)
		env := map[string]string{"DATABASE_URL": url, "FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
			"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey, "FLOWD_PASSWORD_HASH": tt.setting}
		getenv := func(k string) string { return env[k] }
		out, err := flowdtest.RunCLI(getenv, "", "orgs", "create", "--name", "Org One", "--json")
		var org struct{ ID string }
		if err != nil || json.Unmarshal([]byte(out), &org) != nil {
			t.Fatalf("orgs create: %q %v", out, err)
		}
		if _, err := flowdtest.RunCLI(getenv, "a long enough password\n", "staff", "create", "--org", org.ID,
			"--username", "ada", "--role", "admin", "--password-stdin"); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		var hash string
		err = conn.QueryRow(context.Background(), `select password_hash from staff_accounts where username = 'ada'`).Scan(&hash)
		conn.Close(context.Background())
		if err != nil || !strings.HasPrefix(hash, tt.want) {
			t.Errorf("FLOWD_PASSWORD_HASH=%q stored %.40q (%v), want a hash starting %s", tt.setting, hash, err, tt.want)
		}
	}
}
