package admin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/web"
)

// TestResourcesCreateCommand registers a data holder's resource from the
// command line, as the API does: printed as the API shows it, refused
// once registered and for a relative URI, and audited as the operator's.
func TestResourcesCreateCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t), "FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey,
		"FLOWD_PASSWORD_HASH": flowdtest.TestPasswordHash}
	getenv := func(k string) string { return env[k] }
	run := func(args ...string) (string, error) { return flowdtest.RunCLI(getenv, "", args...) }
	orgOut, err := run("orgs", "create", "--name", "Tax Authority", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(orgOut), &org); err != nil {
		t.Fatal(err)
	}
	out, err := run("resources", "create", "--org", org.ID, "--uri", "https://api.tax.example/income", "--name", "Income records", "--json")
	var r web.ResourceJSON
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.URI != "https://api.tax.example/income" || r.CreatedBy != "cli" || r.ID == "" {
		t.Fatalf("create: %q %v", out, err)
	}
	if out, err := run("resources", "create", "--org", org.ID, "--uri", "https://api.tax.example/income", "--name", "Again"); err == nil ||
		!strings.Contains(err.Error(), "registered already") {
		t.Fatalf("again: %q %v", out, err)
	}
	if out, err := run("resources", "create", "--org", org.ID, "--uri", "/income", "--name", "X"); err == nil || !strings.Contains(err.Error(), "--uri") {
		t.Fatalf("a relative uri: %q %v", out, err)
	}
	if out, err := run("resources", "create", "--uri", "https://x.example", "--name", "X"); err == nil {
		t.Fatalf("without --org: %q", out)
	}
}
