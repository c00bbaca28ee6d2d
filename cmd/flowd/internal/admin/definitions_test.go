package admin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/web"
)

func TestDefinitionsCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t), "FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey,
		"FLOWD_PASSWORD_HASH": flowdtest.TestPasswordHash}
	getenv := func(k string) string { return env[k] }
	run := func(stdin string, args ...string) (string, error) { return flowdtest.RunCLI(getenv, stdin, args...) }
	orgOut, err := run("", "orgs", "create", "--name", "Fjord Bank", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(orgOut), &org); err != nil {
		t.Fatal(err)
	}

	// A fresh organization has its default.
	out, err := run("", "definitions", "list", "--org", org.ID)
	if err != nil || !strings.Contains(out, "consent  version 1  default  Fjord Bank asks for your consent") {
		t.Fatalf("list: %q %v", out, err)
	}

	file := filepath.Join(t.TempDir(), "loan.json")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"id":"loan","title":{"en":"Loan check","nb":"Lånesjekk"},"purpose":{"en":"We check.","nb":"Vi sjekker."},"validity":"P1Y"}`)
	out, err = run("", "definitions", "publish", "--org", org.ID, "--file", file, "--json")
	var v1 web.FlowDefinition
	if err != nil || json.Unmarshal([]byte(out), &v1) != nil || v1.ID != "loan" || v1.Version != 1 || v1.PublishedBy != "cli" ||
		v1.Recipient != "Fjord Bank" || *v1.Validity != "P1Y" || len(v1.TextSHA256) != 64 {
		t.Fatalf("publish a new definition: %q %v", out, err)
	}
	write(`{"title":{"en":"Loan check, revised","nb":"Lånesjekk, revidert"},"purpose":{"en":"We check.","nb":"Vi sjekker."}}`)
	if out, err = run("", "definitions", "publish", "--org", org.ID, "--id", "loan", "--file", "-"); err == nil {
		t.Fatalf("publish from an empty stdin: %q", out)
	}
	body, _ := os.ReadFile(file)
	if out, err = run(string(body), "definitions", "publish", "--org", org.ID, "--id", "loan", "--file", "-"); err != nil ||
		!strings.Contains(out, "loan version 2 of 2") {
		t.Fatalf("publish version 2: %q %v", out, err)
	}
	out, err = run("", "definitions", "show", "loan", "--org", org.ID, "--version", "1", "--json")
	var again web.FlowDefinition
	if err != nil || json.Unmarshal([]byte(out), &again) != nil || again.Title.EN != "Loan check" || again.LatestVersion != 2 ||
		again.TextSHA256 != v1.TextSHA256 {
		t.Fatalf("show version 1: %q %v", out, err)
	}
	if out, err = run("", "definitions", "show", "loan", "--org", org.ID); err != nil || !strings.Contains(out, "[nb] Lånesjekk, revidert") {
		t.Fatalf("show the latest: %q %v", out, err)
	}
	// The definition may also follow the flags, as "flowd help" once wrote it.
	if out, err = run("", "definitions", "show", "--org", org.ID, "loan", "--version", "1"); err != nil ||
		!strings.Contains(out, "loan version 1 of 2\n") || !strings.Contains(out, "[en] Loan check\nWe check.\n") ||
		!strings.Contains(out, "text SHA-256 "+v1.TextSHA256+"\n") || !strings.Contains(out, "valid P1Y, recipient Fjord Bank") ||
		!strings.Contains(out, "created "+time.Time(v1.CreatedAt).UTC().Format("2006-01-02 15:04")) {
		t.Fatalf("show --org ORG loan --version 1: %q %v", out, err)
	}
	out, err = run("", "definitions", "list", "--org", org.ID, "--json")
	var list struct{ Data []web.FlowDefinition }
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Data) != 2 {
		t.Fatalf("list --json: %q %v", out, err)
	}
	if d := list.Data[0]; d.ID != "consent" || !d.Default || d.Version != 1 || d.AssuranceLevel != "low" || d.Validity != nil {
		t.Errorf("list --json: the default is %+v", d)
	}
	if d := list.Data[1]; d.ID != "loan" || d.Default || d.Version != 2 || d.LatestVersion != 2 || d.Title.EN != "Loan check, revised" ||
		d.Links.Self != "/api/flow-definitions/loan/versions/2" || d.RetiredAt != nil {
		t.Errorf("list --json: loan is %+v", d)
	}

	tests := []struct {
		name string
		file string
		args []string
		want string
	}{
		{"bad fields", `{"id":"bad","title":{"en":"","nb":"x"},"purpose":{"en":"p","nb":"p"},"assuranceLevel":"extreme"}`, nil,
			"title.en is required; assuranceLevel must be low, substantial or high"},
		{"an unknown member", `{"id":"bad","html":"<b>"}`, nil, `unknown field "html"`},
		{"a member given twice", `{"id":"twice","title":{"en":"t","nb":"t","en":"u"},"purpose":{"en":"p","nb":"p"}}`, nil, "title.en is given more than once"},
		{"no id", `{"title":{"en":"t","nb":"t"},"purpose":{"en":"p","nb":"p"}}`, nil, "--id"},
		{"--id and the file's id differ", `{"id":"other","title":{"en":"t","nb":"t"},"purpose":{"en":"p","nb":"p"}}`,
			[]string{"definitions", "publish", "--org", org.ID, "--id", "loan", "--file", file}, `--id "loan" and the file's id "other" differ`},
		{"something after the object", `{"id":"loan","title":{"en":"t","nb":"t"},"purpose":{"en":"p","nb":"p"}} {"id":"x"}`, nil,
			"nothing after the JSON object"},
		{"an empty file", ``, nil, "one JSON object"},
		{"not UTF-8", "{\"id\":\"latin1\",\"title\":{\"en\":\"L\xe5n\",\"nb\":\"L\xe5n\"},\"purpose\":{\"en\":\"p\",\"nb\":\"p\"}}", nil,
			"not valid UTF-8"},
		{"two definitions named", "", []string{"definitions", "show", "loan", "consent", "--org", org.ID}, `unexpected argument "consent"`},
		{"no definition named", "", []string{"definitions", "show", "--org", org.ID}, "name the definition"},
		{"the default cannot retire", "", []string{"definitions", "retire", "consent", "--org", org.ID}, "cannot be retired"},
		{"an unknown definition", "", []string{"definitions", "show", "nope", "--org", org.ID}, "no such consent definition"},
		{"no organization", "", []string{"definitions", "list"}, "--org is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" || args == nil {
				write(tt.file)
			}
			if args == nil {
				args = []string{"definitions", "publish", "--org", org.ID, "--file", file}
			}
			if out, err := run("", args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: %q %v, want an error with %q", args, out, err, tt.want)
			}
		})
	}

	if _, err := run("", "definitions", "retire", "loan", "--org", org.ID); err != nil {
		t.Fatal(err)
	}
	write(`{"id":"loan","title":{"en":"t","nb":"t"},"purpose":{"en":"p","nb":"p"}}`)
	if _, err := run("", "definitions", "publish", "--org", org.ID, "--file", file); err == nil || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("publish to a retired definition: %v", err)
	}
	if out, err := run("", "definitions", "list", "--org", org.ID, "--json"); err != nil || !strings.Contains(out, `"retiredAt":"`) {
		t.Fatalf("list --json after retiring: %q %v", out, err)
	}
}

// docsTextHash finds the worked example of the text hash in the docs: the
// file published, its canonical text, and the hashes shown.
var docsTextHash = regexp.MustCompile("(?s)\\*\\*The text hash\\.\\*\\*.*?```json\n(.*?)```.*?```text\n(.*?)\n```(.*?)\\*\\*Assurance levels\\*\\*")

// TestTheDocsTextHashExample: the example a reader reproduces with jq and
// sha256sum is what flowd computes.
func TestTheDocsTextHashExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "consent-and-console.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := docsTextHash.FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/consent-and-console.md has no worked example of the text hash")
	}
	draft, canonical := m[1], m[2]
	sum := sha256.Sum256(canonical)
	want := hex.EncodeToString(sum[:])
	shown := regexp.MustCompile(`[0-9a-f]{64}`).FindAllString(string(m[3]), -1)
	if len(shown) == 0 || slices.ContainsFunc(shown, func(h string) bool { return h != want }) {
		t.Errorf("the docs show the hashes %q; the SHA-256 of their canonical text is %s", shown, want)
	}

	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t), "FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey,
		"FLOWD_PASSWORD_HASH": flowdtest.TestPasswordHash}
	run := func(stdin string, args ...string) (string, error) {
		return flowdtest.RunCLI(func(k string) string { return env[k] }, stdin, args...)
	}
	orgOut, err := run("", "orgs", "create", "--name", "Fjord Bank", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(orgOut), &org); err != nil {
		t.Fatal(err)
	}
	out, err := run(string(draft), "definitions", "publish", "--org", org.ID, "--file", "-", "--json")
	var v web.FlowDefinition
	if err != nil || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("publish the docs' example: %q %v", out, err)
	}
	if v.Version != 1 || v.TextSHA256 != want {
		t.Errorf("the docs' example publishes as version %d with textSha256 %s; its canonical text in the docs hashes to %s",
			v.Version, v.TextSHA256, want)
	}
}
