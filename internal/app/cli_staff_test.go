package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/flowdtest"
)

func TestStaffCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t), "FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey}
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
