package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// apiClient is an API client's credentials, which outlive the instance
// that issued its tokens when its database is restored elsewhere.
type apiClient struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

// createOrgWithClient makes an organization and an API client of it.
func createOrgWithClient(t *testing.T, in *flowdtest.Instance, name, prefix string) (org, apiClient) {
	t.Helper()
	var o org
	if err := json.Unmarshal([]byte(in.CLI(t, "", "orgs", "create", "--name", name, "--prefix", prefix, "--json")), &o); err != nil {
		t.Fatal(err)
	}
	var c apiClient
	if err := json.Unmarshal([]byte(in.CLI(t, "", "clients", "create", "--org", o.ID, "--json")), &c); err != nil {
		t.Fatal(err)
	}
	return o, c
}

// client is c's HTTP client against in, every answer checked against the
// OpenAPI document.
func (c apiClient) at(t *testing.T, in *flowdtest.Instance) *http.Client {
	cc := clientcredentials.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: in.URL + "/oauth/token"}
	return cc.Client(context.WithValue(context.Background(), oauth2.HTTPClient, openapitest.Client(t)))
}

// getText GETs url and returns its status and body.
func getText(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAnErasureHoldsAfterARestoreFromBackup: a backup (pg_dump) is taken
// while a person has flows in two organizations, one of them accepted and
// used with free text about the person; one organization erases them.
// Nothing of them is readable there any more (the API, the events API, the
// console's list, the sealed columns, which no key that remains opens, rows
// not yet cleaned and the backup's included, and no table of a dump of the
// whole database, events included, holds their national id, their last
// name or the use's text; the backup's dump holds the text only sealed),
// the other organization's flow is untouched, and the erasure receipt,
// which says when the person's key was destroyed, verifies with an
// independent JOSE library and with flowd receipts verify. The backup is
// restored into a new database, where the person is back, until flowd
// erasures reapply with the export erases them again; after that the same
// holds there, and a second run finds nothing to do. An export with a bad
// line changes nothing.
func TestAnErasureHoldsAfterARestoreFromBackup(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	acme, acmeClient := createOrgWithClient(t, in, "Erasing Bank", "ERA")
	_, otherClient := createOrgWithClient(t, in, "Keeping Lender", "KEP")
	acmeAPI, otherAPI := acmeClient.at(t, in), otherClient.at(t, in)
	person, lastName := rightID, "Erasedottir"
	create := func(api *http.Client, nationalID string) createdFlow {
		t.Helper()
		var f createdFlow
		payload := `{"nationalId":"` + nationalID + `","lastName":"` + lastName + `","redirectUrl":"https://bank.example/done"}`
		if resp := call(t, api, "POST", in.URL+"/api/flows", payload, &f); resp.StatusCode != 201 {
			t.Fatalf("create: %d", resp.StatusCode)
		}
		return f
	}
	erased := []createdFlow{create(acmeAPI, person), create(acmeAPI, person)}
	kept := create(otherAPI, person)
	staying := create(acmeAPI, "01017012345")
	// The person accepts one, and the organization records a use of it in
	// words about them.
	if loc, _ := formbrowser.Consent(t, in.URL, erased[0].Links.Consent.Href, person, "accept"); !strings.Contains(loc, "status=accepted") {
		t.Fatalf("after accepting: %s", loc)
	}
	action, reference := "fetched income of "+lastName, "case-"+person
	if resp := call(t, acmeAPI, "POST", in.URL+"/api/flows/"+erased[0].FlowID+"/uses",
		`{"action":"`+action+`","reference":"`+reference+`"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("record a use: %d", resp.StatusCode)
	}
	written := []string{person, lastName, action, reference}

	dir := t.TempDir()
	dump := filepath.Join(dir, "flowd.dump")
	pgRun(t, "pg_dump", "--format=custom", "--no-owner", "--file="+dump, in.DatabaseURL)
	// The backup holds the use's text sealed under the person's key alone.
	if found := inDump(t, in.DatabaseURL, action, reference); len(found) > 0 {
		t.Fatalf("the backup holds the use's text as written: %v", found)
	}

	// What the database holds of the flows, sealed, as a row the erasure
	// has not yet cleaned would hold it.
	uncleaned := readSealed(t, in.DatabaseURL, erased[0].FlowID, erased[1].FlowID)
	if !uncleaned[0].opens(remainingKeys(t, in.DatabaseURL)) {
		t.Fatal("before the erasure, the database's keys do not open the person's flow")
	}

	var erasure struct {
		ID             string  `json:"id"`
		Receipt        string  `json:"receipt"`
		FlowCount      int     `json:"flowCount"`
		KeyDestroyedAt *string `json:"keyDestroyedAt"`
	}
	if resp := call(t, acmeAPI, "POST", in.URL+"/api/erasures", `{"nationalId":"`+person+`"}`, &erasure); resp.StatusCode != 201 ||
		erasure.FlowCount != 2 || erasure.KeyDestroyedAt == nil {
		t.Fatalf("erase: %d %+v", resp.StatusCode, erasure)
	}
	checkShredded(t, "after the erasure", in.DatabaseURL, uncleaned)
	if found := inDump(t, in.DatabaseURL, written...); len(found) > 0 {
		t.Errorf("after the erasure, a dump of the database holds what was written about the person: %v", found)
	}
	if keptSealed := readSealed(t, in.DatabaseURL, kept.FlowID, staying.FlowID); !keptSealed[0].opens(remainingKeys(t, in.DatabaseURL)) ||
		!keptSealed[1].opens(remainingKeys(t, in.DatabaseURL)) {
		t.Error("after the erasure, the other organization's flow, or another person's, no longer opens")
	}
	staffSeen := 0
	staff := func(in *flowdtest.Instance) *staffBrowser {
		staffSeen++
		username := fmt.Sprintf("viewer-%d@bank.example", staffSeen)
		in.CLI(t, staffPassword, "staff", "create", "--org", acme.ID, "--username", username,
			"--name", "Vic", "--role", "viewer", "--password-stdin", "--json")
		b := newStaffBrowser(t, in.URL)
		b.signIn(username)
		return b
	}
	holdsNothing := func(in *flowdtest.Instance, acmeAPI, otherAPI *http.Client, where string) {
		t.Helper()
		for _, f := range erased {
			if resp := call(t, acmeAPI, "GET", in.URL+"/api/flows/"+f.FlowID, "", nil); resp.StatusCode != 404 {
				t.Errorf("%s: the erased flow %s answers %d", where, f.FlowID, resp.StatusCode)
			}
			if _, events := getText(t, acmeAPI, in.URL+"/api/events?flowId="+f.FlowID); strings.Contains(events, person) ||
				strings.Contains(events, lastName) || strings.Contains(events, action) {
				t.Errorf("%s: the events API shows the person: %s", where, events)
			}
		}
		for _, path := range []string{"/api/flows?limit=100", "/api/events?limit=100"} {
			if _, list := getText(t, acmeAPI, in.URL+path); strings.Contains(list, erased[0].FlowID) && path == "/api/flows?limit=100" ||
				strings.Contains(list, person) || strings.Contains(list, lastName) {
				t.Errorf("%s: %s shows the person: %s", where, path, list)
			}
		}
		console := staff(in).get("/console/flows")
		if console.Status != 200 || !strings.Contains(console.Body, staying.ReferenceID) {
			t.Fatalf("%s: the console's flow list: %d %s", where, console.Status, console.Body)
		}
		for _, f := range erased {
			if strings.Contains(console.Body, f.ReferenceID) || strings.Contains(console.Body, lastName+"</") {
				t.Errorf("%s: the console's flow list shows the erased flow %s", where, f.ReferenceID)
			}
		}
		var other struct {
			Flow struct {
				Data struct {
					NationalID string `json:"nationalId"`
					LastName   string `json:"lastName"`
				} `json:"data"`
			} `json:"flow"`
		}
		if resp := call(t, otherAPI, "GET", in.URL+"/api/flows/"+kept.FlowID, "", &other); resp.StatusCode != 200 ||
			other.Flow.Data.NationalID != person || other.Flow.Data.LastName != lastName {
			t.Errorf("%s: the other organization's flow: %d %+v", where, resp.StatusCode, other)
		}
	}
	holdsNothing(in, acmeAPI, otherAPI, "after the erasure")

	// The receipt: jwx against the published keys, and the CLI.
	claims, err := verifyWithJWKS(context.Background(), in.URL+"/oauth/jwks", erasure.Receipt)
	if err != nil || claims["erasureId"] != erasure.ID || claims["organizationName"] != "Erasing Bank" || claims["flowCount"] != float64(2) ||
		claims["keyDestroyedAt"] == nil {
		t.Fatalf("jwx on the erasure receipt: %v %v", claims, err)
	}
	receiptFile := filepath.Join(dir, "erasure.jwt")
	if err := os.WriteFile(receiptFile, []byte(erasure.Receipt), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := in.CLI(t, "", "receipts", "verify", receiptFile); !strings.Contains(out, "Valid") || !strings.Contains(out, "flows erased   2") {
		t.Fatalf("flowd receipts verify:\n%s", out)
	}

	export := filepath.Join(dir, "erasures.jsonl")
	in.CLI(t, "", "erasures", "export", "--out", export)
	raw, err := os.ReadFile(export)
	if err != nil || strings.Count(string(raw), "\n") != 1 || !strings.Contains(string(raw), erasure.ID) || strings.Contains(string(raw), person) {
		t.Fatalf("the export (%v):\n%s", err, raw)
	}

	// The backup, restored into a new database: the person is back.
	restoredURL := newEmptyDatabase(t, in.DatabaseURL)
	pgRun(t, "pg_restore", "--no-owner", "--dbname="+restoredURL, dump)
	restored := flowdtest.Start(t, flowdtest.WithDatabase(restoredURL))
	rAcme, rOther := acmeClient.at(t, restored), otherClient.at(t, restored)
	if resp := call(t, rAcme, "GET", restored.URL+"/api/flows/"+erased[0].FlowID, "", nil); resp.StatusCode != 200 {
		t.Fatalf("the restored backup does not hold the erased flow: %d", resp.StatusCode)
	}
	// The backup's sealed columns: the erased database's keys open none of
	// them, though the backup's own keys do, until the reapply.
	backedUp := readSealed(t, restoredURL, erased[0].FlowID, erased[1].FlowID)
	checkShredded(t, "the backup, with the erased database's keys", in.DatabaseURL, backedUp)
	if !backedUp[0].opens(remainingKeys(t, restoredURL)) {
		t.Fatal("the restored backup's keys do not open the person's flow")
	}

	// A bad export changes nothing.
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, append(raw, []byte("{\"erasureId\":\"not an id\"}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := flowdtest.RunCLI(restored.Getenv, "", "erasures", "reapply", bad); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("reapply of a bad export: %v\n%s", err, out)
	}
	if resp := call(t, rAcme, "GET", restored.URL+"/api/flows/"+erased[0].FlowID, "", nil); resp.StatusCode != 200 {
		t.Fatalf("a refused reapply erased the flow: %d", resp.StatusCode)
	}

	out := restored.CLI(t, "", "erasures", "reapply", export)
	if !strings.Contains(out, "erasure "+erasure.ID+" of organization "+acme.ID+": erased again: 2 flows, tombstone restored") {
		t.Fatalf("reapply printed:\n%s", out)
	}
	holdsNothing(restored, rAcme, rOther, "after the restore and reapply")
	checkShredded(t, "the backup after the reapply", restoredURL, backedUp)
	if found := inDump(t, restoredURL, written...); len(found) > 0 {
		t.Errorf("after the restore and reapply, a dump of the database holds what was written about the person: %v", found)
	}
	if again := restored.CLI(t, "", "erasures", "reapply", export); !strings.Contains(again, "already erased") || strings.Contains(again, "erased again:") {
		t.Fatalf("a second reapply printed:\n%s", again)
	}
	var got struct {
		Data []struct{ ID string } `json:"data"`
	}
	if resp := call(t, rAcme, "GET", restored.URL+"/api/erasures", "", &got); resp.StatusCode != 200 || len(got.Data) != 1 || got.Data[0].ID != erasure.ID {
		t.Fatalf("the restored database's erasures: %d %+v", resp.StatusCode, got)
	}
}

// inDump dumps every table of the database at dbURL (pg_dump, as text) and
// returns which of texts it holds, each with the tables that hold it.
func inDump(t *testing.T, dbURL string, texts ...string) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "dump.sql")
	pgRun(t, "pg_dump", "--format=plain", "--data-only", "--no-owner", "--file="+file, dbURL)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, text := range texts {
		var tables []string
		table := ""
		for _, line := range strings.Split(string(raw), "\n") {
			if name, ok := strings.CutPrefix(line, "COPY "); ok {
				table, _, _ = strings.Cut(name, " ")
			}
			if strings.Contains(line, text) && !slices.Contains(tables, table) {
				tables = append(tables, table)
			}
		}
		if len(tables) > 0 {
			found = append(found, fmt.Sprintf("%q in %s", text, strings.Join(tables, ", ")))
		}
	}
	return found
}

// pgRun runs one of PostgreSQL's client programs, found where scripts/pg.sh
// finds the server: on PATH, else in Debian's newest /usr/lib/postgresql/*/bin.
// The suite runs on a PostgreSQL it started, so they are always there.
func pgRun(t *testing.T, program string, args ...string) {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(pgMajor(b), pgMajor(a)) })
		if len(dirs) == 0 {
			t.Fatalf("%s is neither on PATH nor in /usr/lib/postgresql/*/bin", program)
		}
		path = filepath.Join(dirs[0], program)
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", program, err, out)
	}
}

// pgMajor is the major version of a /usr/lib/postgresql/N/bin folder.
func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// newEmptyDatabase makes an empty database beside the one of like, dropped
// at cleanup, and returns its URL.
func newEmptyDatabase(t *testing.T, like string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, like)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	u, err := url.Parse(like)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/") + "_restored"
	if _, err := conn.Exec(ctx, `create database `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), like)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `drop database if exists `+pgx.Identifier{name}.Sanitize()+` with (force)`)
	})
	u.Path = "/" + name
	return u.String()
}
