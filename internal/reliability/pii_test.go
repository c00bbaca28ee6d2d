package reliability_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
)

// column is one column of a table of the database.
type column struct{ table, name, typ string }

// scannable lists every text, bytea and JSON column of every table.
func scannable(t *testing.T, pool *pgxpool.Pool) []column {
	t.Helper()
	rows, err := pool.Query(context.Background(), `select table_schema || '.' || table_name, column_name, data_type
		from information_schema.columns
		where table_schema not in ('pg_catalog', 'information_schema')
		  and data_type in ('text', 'character varying', 'character', 'bytea', 'json', 'jsonb', 'ARRAY', 'uuid')
		order by 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.table, &c.name, &c.typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if len(out) < 20 {
		t.Fatalf("only %d columns to scan", len(out))
	}
	return out
}

// findInDatabase returns "table.column" for every column holding needle in
// any row: as text, and as bytes (also hex and base64 encoded) in bytea.
func findInDatabase(t *testing.T, pool *pgxpool.Pool, needles ...string) []string {
	t.Helper()
	var hits []string
	for _, c := range scannable(t, pool) {
		ident := fmt.Sprintf(`%s.%q`, c.table, c.name)
		var expr string
		switch c.typ {
		case "bytea":
			expr = "encode(" + ident + ", 'escape') || ' ' || encode(" + ident + ", 'hex') || ' ' || encode(" + ident + ", 'base64')"
		default:
			expr = ident + "::text"
		}
		for _, n := range needles {
			forms := []string{n, strings.ToLower(n), hex.EncodeToString([]byte(n)), base64.StdEncoding.EncodeToString([]byte(n)),
				base64.RawURLEncoding.EncodeToString([]byte(n))}
			var found bool
			sql := fmt.Sprintf(`select exists (select 1 from %s where %s ilike any($1))`, c.table, expr)
			pats := make([]string, len(forms))
			for i, f := range forms {
				pats[i] = "%" + strings.NewReplacer(`%`, `\%`, `_`, `\_`).Replace(f) + "%"
			}
			if err := pool.QueryRow(context.Background(), sql, pats).Scan(&found); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			if found {
				hits = append(hits, c.table+"."+c.name+" holds "+n)
			}
		}
	}
	return hits
}

// TestNoPersonalDataInClear runs a whole journey — create with a webhook,
// consent through the test eID, accept — then scans every text, bytea and
// JSON column of every table, flowd's logs (at debug level) and every
// webhook body: the national id and last name appear nowhere in clear.
// Deleting the flow then leaves nothing of it but the deletion log.
func TestNoPersonalDataInClear(t *testing.T) {
	t.Parallel()
	const nationalID, lastName = "PIIX7734219Q", "Quixotesdottir"
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", map[string]string{"FLOWD_LOG_LEVEL": "debug"})
	tn := newTenant(t, p.Env, "Privacy Bank", "PRIV")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)

	a := mustDo(t, "POST", p.URL+"/api/flows", tok, createBody(nationalID, lastName, rcv.URL()), "Idempotency-Key", "privacy-1")
	if a.Status != 201 {
		t.Fatalf("create: %d %s", a.Status, a.Body)
	}
	var created struct {
		FlowID string `json:"flowId"`
		Links  struct {
			Consent struct{ Href string } `json:"consent"`
		} `json:"_links"`
	}
	a.json(t, &created)
	loc, _ := formbrowser.Consent(t, p.URL, created.Links.Consent.Href, nationalID, "accept")
	if !strings.HasPrefix(loc, "https://bank.example/done?") || !strings.Contains(loc, "status=accepted") {
		t.Fatalf("after accepting: %s", loc)
	}
	eventually(t, "created, opened and accepted delivered", func() bool {
		return count(t, pool, `select count(*) from webhook_events where state = 'delivered'`) == 3
	})
	// The API still gives the organization its data back: it is sealed, not lost.
	var got struct {
		Flow struct {
			Data struct{ NationalID, LastName string } `json:"data"`
		} `json:"flow"`
	}
	mustDo(t, "GET", p.URL+"/api/flows/"+created.FlowID, tok, "").json(t, &got)
	if got.Flow.Data.NationalID != nationalID || got.Flow.Data.LastName != lastName {
		t.Fatalf("retrieve: %+v", got.Flow.Data)
	}

	for _, hit := range findInDatabase(t, pool, nationalID, lastName) {
		t.Errorf("in clear in the database: %s", hit)
	}
	logs := p.Logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) && !strings.Contains(logs, "request") {
		t.Errorf("the logs are empty: the scan would prove nothing")
	}
	for _, s := range []string{nationalID, lastName, strings.ToLower(lastName)} {
		if strings.Contains(logs, s) {
			t.Errorf("the logs hold %q", s)
		}
	}
	ds := rcv.deliveries()
	if len(ds) < 3 {
		t.Fatalf("%d webhook deliveries", len(ds))
	}
	for _, d := range ds {
		if strings.Contains(d.Body, nationalID) || strings.Contains(d.Body, lastName) {
			t.Errorf("webhook %s carries personal data: %s", d.Type, d.Body)
		}
	}

	// Deleted: nothing of the flow is left but the deletion log, the
	// (impersonal) events and webhook outbox and, until it expires, the
	// idempotency key that replays the create (a keyed hash, the Location
	// naming the flow, and the sealed answer).
	if a := mustDo(t, "DELETE", p.URL+"/api/flows/"+created.FlowID, tok, ""); a.Status != 200 {
		t.Fatalf("delete: %d %s", a.Status, a.Body)
	}
	allowed := map[string]bool{"public.flow_deletions.flow_id": true, "public.webhook_events.flow_id": true,
		"public.events.flow_id": true, "public.events.body": true,
		"public.webhook_events.body": true, "public.river_job.args": true, "public.api_idempotency_keys.header": true}
	for _, hit := range findInDatabase(t, pool, created.FlowID) {
		if col, _, _ := strings.Cut(hit, " holds "); !allowed[col] {
			t.Errorf("the deleted flow is still in %s", col)
		}
	}
	for _, table := range []string{"flows", "consent_requests"} {
		if n := count(t, pool, "select count(*) from "+table); n != 0 {
			t.Errorf("%s keeps %d rows after the only flow was deleted", table, n)
		}
	}
	for _, hit := range findInDatabase(t, pool, nationalID, lastName) {
		t.Errorf("in clear after deletion: %s", hit)
	}
}
