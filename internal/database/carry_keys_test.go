package database_test

import (
	"context"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/migrations"
)

// migrationNumber is the number of the migration named name, found by its
// name so that a renumbering at a merge does not break the test.
func migrationNumber(t *testing.T, name string) int32 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*_"+name+".sql")
	if err != nil || len(files) != 1 {
		t.Fatalf("migration %s: %v %v", name, files, err)
	}
	n, err := strconv.ParseInt(strings.SplitN(files[0], "_", 2)[0], 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// carriedCreate stands for flow creation's idempotency.Carried.
type carriedCreate struct{ request string }

func (c carriedCreate) Fingerprint(idempotency.Request) (string, bool) { return c.request, true }

func (carriedCreate) Body(flowID, referenceID, consentURL string) ([]byte, error) {
	return []byte(flowID + " " + referenceID + " " + consentURL), nil
}

// TestCreatesKeysAreCarriedIntoTheOneStore: the migration one_idempotency_store
// carries each unexpired key of flow_idempotency_keys whose create committed
// into api_idempotency_keys, where it replays the create's answer for the
// create's request (its hash and sealed link as they were); an expired key,
// a key only claimed, and an expired answer holding a carried key's name are
// gone, and so is the old table.
func TestCreatesKeysAreCarriedIntoTheOneStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, dbtest.NewEmptyURL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := database.MigrateTo(ctx, pool, migrationNumber(t, "one_idempotency_store")-1); err != nil {
		t.Fatal(err)
	}
	sealer, err := pii.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	const flowID, request = "019ab3c6-3333-7f80-9a1b-2c3d4e5f6a7d", `"client-a","false","ID-1"`
	link := sealer.Seal("https://flowd.example/consent/tok", "idempotency:"+flowID)
	for _, k := range []struct {
		key, expires string
		sealed       []byte
	}{
		{"live", "1 hour", link},
		{"expired", "-1 second", link},
		{"claimed", "1 hour", nil},
	} {
		if _, err := pool.Exec(ctx, `insert into flow_idempotency_keys (organization_id, key, request_hash, flow_id,
			reference_id, pii_key_id, consent_sealed, expires_at) values ('org-a', $1, $2, $3, 'FLOW-7', $4, $5, now() + $6::interval)`,
			k.key, sealer.Hash("idempotency", request), flowID, sealer.KeyID(), k.sealed, k.expires); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `insert into api_idempotency_keys (organization_id, key, request_hash, method, path, status,
		header, pii_key_id, body_sealed, expires_at) values ('org-a', 'live', '\x00', 'POST', '/api/resources', 201, '{}', 'k', '\x00',
		now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}

	if err := database.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if dbtest.Citus() {
		if err := database.Distribute(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	// The table stays for instances of the previous version, which still
	// write it while the new one rolls out.
	var left bool
	if err := pool.QueryRow(ctx, `select to_regclass('flow_idempotency_keys') is not null`).Scan(&left); err != nil || !left {
		t.Fatalf("flow_idempotency_keys was dropped: %v %v", left, err)
	}
	var rows []string
	r, err := pool.Query(ctx, `select key || ' ' || method || ' ' || path || ' ' || status || ' ' || coalesce(flow_id::text, '-')
		|| ' ' || (carried->>'flowId') || ' ' || (carried->>'referenceId') from api_idempotency_keys order by key`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, s)
	}
	if want := "live POST /api/flows 201 - " + flowID + " FLOW-7"; len(rows) != 1 || rows[0] != want {
		t.Fatalf("rows %q, want [%q]", rows, want)
	}

	keys := idempotency.New(pool, sealer, slog.New(slog.DiscardHandler), 0)
	create := idempotency.Request{OrganizationID: "org-a", ClientID: "client-a", Key: "live", Method: "POST", Path: "/api/flows",
		Body: []byte(`{}`), Carried: carriedCreate{request}}
	a, err := keys.Lookup(ctx, create)
	if err != nil || a.Status != 201 || a.Header.Get("Location") != "/api/flows/"+flowID ||
		a.Header.Get("Content-Type") != "application/json" || string(a.Body) != flowID+" FLOW-7 https://flowd.example/consent/tok" {
		t.Fatalf("the carried key: %+v %v", a, err)
	}
	create.Carried = carriedCreate{`"client-a","false","ID-2"`}
	if _, err := keys.Lookup(ctx, create); err == nil {
		t.Fatal("the carried key replayed for another create")
	}
}
