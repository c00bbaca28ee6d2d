package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/webhooks"
)

type listPage struct {
	HasMore bool `json:"has_more"`
	Data    []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"data"`
}

func (e *apiEnv) page(t *testing.T, query string) listPage {
	t.Helper()
	r := e.call(t, "GET", "/api/flows?"+query, tokA, "")
	var p listPage
	if r.status != 200 || json.Unmarshal(r.body, &p) != nil {
		t.Fatalf("?%s: %d %s", query, r.status, r.body)
	}
	return p
}

func TestPaginationWalksBothWaysWithoutGapsOrRepeats(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	caller := flows.Caller{OrganizationID: orgA, ClientID: "seed"}
	ids := make([]string, 250)
	parallel(len(ids), 4, func(i int) {
		c, err := e.flows.Create(ctx, caller, flows.NewFlow{NationalID: fmt.Sprintf("ID-%d", i), LastName: "N",
			RedirectURL: "https://bank.example/"}, "")
		if err != nil {
			t.Error(err)
			return
		}
		ids[i] = c.FlowID
	})
	if t.Failed() {
		t.FailNow()
	}
	// Many flows share a creation instant, so the id must break ties; a few
	// are archived, and a few opened, so that filters have work to do.
	// to_timestamp, being immutable, may take a column on Citus too.
	if _, err := e.pool.Exec(ctx, `update flows set created_at = to_timestamp($1::float8 - flow_number % 40)`,
		time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:30] {
		if _, err := e.flows.Cancel(ctx, caller, id, etag.Any); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[30:45] {
		if err := database.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
			_, err := e.flows.MarkOpenedTx(ctx, tx, orgA, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	expected := func(where string) []string {
		rows, err := e.pool.Query(ctx, `select id::text from flows where `+where+` order by created_at desc, id desc`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name, query, where string
		limit              int
	}{
		{"active", "", "not archived", 7},
		{"archived", "archived=true", "archived", 4},
		{"opened", "status=Opened", "not archived and consent_status = 'Opened'", 6},
		{"default page size", "", "not archived", 0},
		{"largest pages", "", "not archived", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := expected(tt.where)
			size := tt.limit
			q := tt.query
			if size == 0 {
				size = 10
			} else {
				q += fmt.Sprintf("&limit=%d", size)
			}
			// Forwards from the newest.
			var got []string
			cursor := ""
			for {
				p := e.page(t, q+cursor)
				if len(p.Data) > size || (p.HasMore && len(p.Data) != size) {
					t.Fatalf("page of %d with has_more %v", len(p.Data), p.HasMore)
				}
				for _, d := range p.Data {
					got = append(got, d.ID)
				}
				if !p.HasMore {
					break
				}
				cursor = "&starting_after=" + got[len(got)-1]
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("forwards: %d flows, want %d in order", len(got), len(want))
			}
			// Backwards from the oldest.
			var back []string
			cursor = "&ending_before=" + want[len(want)-1]
			back = append(back, want[len(want)-1])
			for {
				p := e.page(t, q+cursor)
				if len(p.Data) > size || (p.HasMore && len(p.Data) != size) {
					t.Fatalf("backwards: page of %d with has_more %v", len(p.Data), p.HasMore)
				}
				page := make([]string, len(p.Data))
				for i, d := range p.Data {
					page[i] = d.ID
				}
				back = append(page, back...)
				if !p.HasMore {
					break
				}
				cursor = "&ending_before=" + page[0]
			}
			if strings.Join(back, ",") != strings.Join(want, ",") {
				t.Fatalf("backwards: %d flows, want %d in order", len(back), len(want))
			}
		})
	}
	// has_more is exact at the edges: a page that ends exactly at the last flow says so.
	want := expected("not archived")
	if p := e.page(t, "limit=5&starting_after="+want[len(want)-6]); p.HasMore || len(p.Data) != 5 {
		t.Fatalf("the last five: has_more %v, %d flows", p.HasMore, len(p.Data))
	}
	if p := e.page(t, "limit=5&ending_before="+want[5]); p.HasMore || len(p.Data) != 5 || p.Data[0].ID != want[0] {
		t.Fatalf("the first five backwards: has_more %v, %d flows", p.HasMore, len(p.Data))
	}
	if p := e.page(t, "limit=5&ending_before="+want[6]); !p.HasMore || p.Data[0].ID != want[1] {
		t.Fatalf("one more before: has_more %v", p.HasMore)
	}
	// A cursor at either end is a real flow: an empty page, not a bad cursor.
	if p := e.page(t, "starting_after="+want[len(want)-1]); p.HasMore || len(p.Data) != 0 {
		t.Fatalf("after the oldest: has_more %v, %d flows", p.HasMore, len(p.Data))
	}
	if p := e.page(t, "ending_before="+want[0]); p.HasMore || len(p.Data) != 0 {
		t.Fatalf("before the newest: has_more %v, %d flows", p.HasMore, len(p.Data))
	}
}

func TestListWalksTheIndexFromTheCursor(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	// The query of a deep page must not sort or skip rows: it starts in the page index at the cursor.
	var lines []string
	err := database.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		// Without statistics of an empty table the planner could pick anything;
		// what matters is that the index serves the cursor and the order.
		if _, err := tx.Exec(ctx, `set local enable_seqscan = off; set local enable_bitmapscan = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `explain select id from flows where organization_id = $1 and archived = false
			and (created_at, id) < ($2, $3) order by created_at desc, id desc limit 11`,
			"o", time.Now(), "0190a3c4-0000-7000-8000-000000000000")
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "flows_page_idx") || strings.Contains(plan, "Sort") || !strings.Contains(plan, "AND (ROW(created_at, id) <") || strings.Contains(plan, "Filter") {
		t.Fatalf("the page query does not walk the page index:\n%s", plan)
	}
}

func TestConcurrentCreatesGetDistinctFlowNumbers(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	var mu sync.Mutex
	numbers := map[string]bool{}
	refs := map[string]bool{}
	parallel(50, 50, func(i int) {
		r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"nationalId": fmt.Sprintf("C-%d", i)}))
		if r.status != 201 {
			t.Errorf("create %d: %d %s", i, r.status, r.body)
			return
		}
		var c struct{ FlowID, ReferenceID string }
		_ = json.Unmarshal(r.body, &c)
		mu.Lock()
		refs[c.ReferenceID] = true
		mu.Unlock()
	})
	rows, err := e.pool.Query(context.Background(), `select flow_number::text from flows where organization_id = $1`, orgA)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, n := range got {
		numbers[n] = true
	}
	if len(got) != 50 || len(numbers) != 50 || len(refs) != 50 {
		t.Fatalf("%d flows, %d distinct numbers, %d distinct references", len(got), len(numbers), len(refs))
	}
	// Another organization counts from 1 on its own.
	if r := e.call(t, "POST", "/api/flows", tokB, createBody(map[string]any{"redirectUrl": "https://beta.example/"})); !strings.Contains(string(r.body), `"BETA-1"`) {
		t.Fatalf("B's first flow: %s", r.body)
	}
}

// leftovers counts the rows a failed create might have left behind.
func (e *apiEnv) leftovers(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("flows=%d tasks=%d consent=%d keys=%d events=%d",
		e.count(t, `select count(*) from flows`), e.count(t, `select count(*) from flow_tasks`),
		e.count(t, `select count(*) from consent_requests`), e.count(t, `select count(*) from flow_idempotency_keys`),
		e.count(t, `select count(*) from test_events`))
}

func TestACrashBeforeCommitLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	const empty = "flows=0 tasks=0 consent=0 keys=0 events=0"

	// The last write of the transaction, the event, fails: the API answers 500
	// and everything written before it is rolled back.
	e.events.publish = func(context.Context, webhooks.Event) error { return errors.New("disk full") }
	r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"webhookUrl": "https://hooks.example/h"}), "Idempotency-Key", "k1")
	if r.status != 500 || strings.Contains(string(r.body), "disk full") {
		t.Fatalf("failing publisher: %d %s", r.status, r.body)
	}
	if got := e.leftovers(t); got != empty {
		t.Fatalf("after a failed publish: %s", got)
	}

	// The process dies mid-transaction: here its context ends after every
	// insert but before the commit.
	ctx, cancel := context.WithCancel(context.Background())
	e.events.publish = func(context.Context, webhooks.Event) error { cancel(); return nil }
	_, err := e.flows.Create(ctx, flows.Caller{OrganizationID: orgA, ClientID: "c"}, flows.NewFlow{NationalID: "X1", LastName: "N",
		RedirectURL: "https://bank.example/", WebhookURL: "https://hooks.example/h"}, "k2")
	if err == nil {
		t.Fatal("a create whose context ended before the commit succeeded")
	}
	if got := e.leftovers(t); got != empty {
		t.Fatalf("after a cancelled context: %s", got)
	}

	// The same key then works: the failed attempts did not hold it.
	e.events.publish = nil
	if r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"webhookUrl": "https://hooks.example/h"}), "Idempotency-Key", "k1"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after the crash: %d %s", r.status, r.body)
	}
	if got := e.leftovers(t); got != "flows=1 tasks=2 consent=1 keys=1 events=1" {
		t.Fatalf("after the retry: %s", got)
	}
}

// flowJSON returns the retrieved flow object.
func (e *apiEnv) flowJSON(t *testing.T, id string) map[string]any {
	t.Helper()
	r := e.call(t, "GET", "/api/flows/"+id, tokA, "")
	if r.status != 200 {
		t.Fatalf("get %s: %d %s", id, r.status, r.body)
	}
	return r.json(t)["flow"].(map[string]any)
}

// TestIdempotencyKeyOverHTTP: a replay answers 201 with the first body,
// Location and Idempotent-Replayed: true, also after the flow was deleted
// (within the key's 24 hours); the key with another body answers 422.
func TestIdempotencyKeyOverHTTP(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	body := createBody(map[string]any{"webhookUrl": "https://hooks.example/h"})
	first := e.call(t, "POST", "/api/flows", tokA, body, "Idempotency-Key", "order-42")
	if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	// The same body, formatted differently, replays the first response.
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	indented, _ := json.MarshalIndent(m, "", "  ")
	replayed := func(what, body string) {
		t.Helper()
		r := e.call(t, "POST", "/api/flows", tokA, body, "Idempotency-Key", "order-42")
		if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || string(r.body) != string(first.body) ||
			r.header.Get("Location") != first.header.Get("Location") {
			t.Fatalf("%s: %d %q %s\nwant the first response\n%s", what, r.status, r.header.Get("Idempotent-Replayed"), r.body, first.body)
		}
	}
	replayed("replay", string(indented))
	if r := e.call(t, "DELETE", "/api/flows/"+first.json(t)["flowId"].(string), tokA, ""); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	replayed("replay after delete", body)
	r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"lastName": "Other"}), "Idempotency-Key", "order-42")
	if r.status != 422 || !strings.Contains(string(r.body), "/docs#problem-idempotency-key-reused") {
		t.Fatalf("other body: %d %s", r.status, r.body)
	}
}

// TestIncidentsAreShownOnTheFlow: an open incident of a delivery task is in
// the retrieved flow's incidents, keyed by its id.
func TestIncidentsAreShownOnTheFlow(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	var taskID string
	if err := e.pool.QueryRow(context.Background(), `select task_id from test_events where flow_id = $1`, id).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	const msg = "hooks.example: 502 Bad Gateway"
	if err := flows.NewTaskReports(e.pool).TaskFailing(context.Background(), orgA, taskID, msg); err != nil {
		t.Fatal(err)
	}
	f := e.flowJSON(t, id)
	incidents := f["incidents"].(map[string]any)
	if f["version"] != 2.0 || f["hasIncidents"] != true || f["hasErrors"] != false || len(incidents) != 1 {
		t.Fatalf("with an incident: %v", f)
	}
	for key, v := range incidents {
		inc := v.(map[string]any)
		if keysOf(inc) != "id,message,taskCategory,taskType" || inc["id"] != key || inc["message"] != msg ||
			inc["taskType"] != "send-initiate-webhook" || inc["taskCategory"] != "incident" {
			t.Fatalf("incident %v", inc)
		}
	}
}

func FuzzCreateFlowBody(f *testing.F) {
	for _, seed := range []string{
		createBody(nil),
		createBody(map[string]any{"webhookUrl": "https://hooks.example/h", "referenceName": "R"}),
		`{}`, `[]`, `null`, `{"nationalId":null}`, `{"nationalId":"a","lastName":"b","redirectUrl":"https://x.example"}`,
		`{"nationalId":"` + strings.Repeat("9", 64) + `","lastName":"Ø","redirectUrl":"http://[::1]:8080/cb"}`,
		`{"nationalId":"a","lastName":"b\u0007","redirectUrl":"https://x.example","extra":{}}`,
		`{"nationalId":"a","lastName":"b","redirectUrl":"https://x.example"}{}`,
		"{\"lastName\":\"\xff\"}", `{"redirectUrl":"https://user@x.example"}`, `{"nationalId":1e400}`,
	} {
		f.Add(seed)
	}
	e := newAPI(f)
	f.Fuzz(func(t *testing.T, body string) {
		r := e.call(t, "POST", "/api/flows", tokA, body)
		switch r.status {
		case 201:
			var in, created map[string]any
			if json.Unmarshal([]byte(body), &in) != nil {
				t.Fatalf("201 for a body that is not a JSON object: %q", body)
			}
			_ = json.Unmarshal(r.body, &created)
			g := e.call(t, "GET", "/api/flows/"+fmt.Sprint(created["flowId"]), tokA, "")
			if g.status != 200 {
				t.Fatalf("created flow not retrievable: %d", g.status)
			}
			data := g.json(t)["flow"].(map[string]any)["data"].(map[string]any)
			if data["nationalId"] != strings.TrimSpace(fmt.Sprint(in["nationalId"])) {
				t.Fatalf("stored %v for %v", data["nationalId"], in["nationalId"])
			}
		case 400:
			var p Problem
			if json.Unmarshal(r.body, &p) != nil || p.Status != 400 || len(p.Errors) == 0 {
				t.Fatalf("400 without named fields for %q: %s", body, r.body)
			}
		case 413, 415:
		default:
			t.Fatalf("status %d for %q: %s", r.status, body, r.body)
		}
	})
}

func TestALostDatabaseAnswers503(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokA, nil)
	e.proxy.Cut()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/flows", createBody(nil)},
		{"GET", "/api/flows", ""},
		{"GET", "/api/flows/" + id, ""},
		{"DELETE", "/api/flows/" + id, ""},
	} {
		r := e.call(t, c.method, c.path, tokA, c.body)
		if r.status != 503 || r.header.Get("Retry-After") == "" || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s with the database gone: %d %q %s", c.method, c.path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	e.proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for e.call(t, "GET", "/api/flows/"+id, tokA, "").status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the API did not recover")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestWithdrawingAnAcceptedConsent(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	accepted := e.create(t, tokA, map[string]any{"webhookUrl": "https://hooks.example/flowd"})
	rejected, open := e.create(t, tokA, nil), e.create(t, tokA, nil)
	e.decideWithEvidence(t, accepted, true)
	e.decideWithEvidence(t, rejected, false)
	reason := `{"reason":"The customer withdrew by phone, case 4711."}`

	for _, c := range []struct {
		name, id, token, body string
		status                int
	}{
		{"no reason", accepted, tokA, `{"reason":"  "}`, http.StatusBadRequest},
		{"a reason too long", accepted, tokA, `{"reason":"` + strings.Repeat("x", 401) + `"}`, http.StatusBadRequest},
		{"a reason with a right-to-left override", accepted, tokA, `{"reason":"Asked by phone \u202E"}`, http.StatusBadRequest},
		{"without flows:write", accepted, tokARead, reason, http.StatusForbidden},
		{"another organization's flow", accepted, tokB, reason, http.StatusNotFound},
		{"a rejected consent", rejected, tokA, reason, http.StatusConflict},
		{"an undecided one", open, tokA, reason, http.StatusConflict},
	} {
		if r := e.call(t, "POST", "/api/flows/"+c.id+"/withdraw", c.token, c.body); r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
	}
	if n := e.count(t, `select count(*) from test_events where kind in ('flow.withdrawn', 'audit')`); n != 0 {
		t.Fatalf("refused withdrawals left %d events or audit entries", n)
	}

	r := e.call(t, "POST", "/api/flows/"+accepted+"/withdraw", tokA, reason)
	f := r.json(t)["flow"].(map[string]any)
	consent := f["consent"].(map[string]any)
	if r.status != http.StatusOK || consent["status"] != "Withdrawn" || consent["withdrawnAt"] == nil || f["version"] != 3.0 {
		t.Fatalf("withdraw: %d %s", r.status, r.body)
	}
	if n := e.count(t, `select count(*) from test_events where kind = 'flow.withdrawn' and flow_id = $1 and status = 'Withdrawn' and version = 3`, accepted); n != 1 {
		t.Fatalf("%d flow.withdrawn events", n)
	}
	if n := e.count(t, `select count(*) from test_events where kind = 'audit' and status = 'flow.withdraw' and task_id = 'client:client-a'
		and url = 'The customer withdrew by phone, case 4711.'`); n != 1 {
		t.Fatalf("%d audit entries of the withdrawal", n)
	}
	if r := e.call(t, "POST", "/api/flows/"+accepted+"/withdraw", tokA, reason); r.status != http.StatusConflict {
		t.Fatalf("withdrawing twice: %d", r.status)
	}
	list := e.call(t, "GET", "/api/flows?archived=true&status=Withdrawn", tokA, "").json(t)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != accepted {
		t.Fatalf("withdrawn flows: %v", list)
	}
}

// TestAnExpiredAcceptance: once an acceptance's validity ends and the
// expiry runs, retrieve shows it Expired with expiredAt, the list finds it
// by status=Expired, flow.expired went out once, and it cannot be withdrawn.
func TestAnExpiredAcceptance(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	id := e.create(t, tokA, map[string]any{"webhookUrl": "https://hooks.example/flowd", "flowDefinitionId": e.validFor90Days(t)})
	e.decideWithEvidence(t, id, true)
	consentOf := func() map[string]any {
		r := e.call(t, "GET", "/api/flows/"+id, tokA, "")
		if r.status != http.StatusOK {
			t.Fatalf("retrieve: %d %s", r.status, r.body)
		}
		return r.json(t)["flow"].(map[string]any)["consent"].(map[string]any)
	}
	if c := consentOf(); c["status"] != "Accepted" || c["validUntil"] == nil || c["expiredAt"] != nil {
		t.Fatalf("accepted: %v", c)
	}
	if n, err := e.flows.ExpireDueAcceptances(ctx, 10); n != 0 || err != nil {
		t.Fatalf("expiry before the acceptance is due: %d, %v", n, err)
	}
	if _, err := e.pool.Exec(ctx, `update flows set valid_until = now() - interval '1 second' where id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.flows.ExpireDueAcceptances(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	r := e.call(t, "GET", "/api/flows/"+id, tokA, "")
	f := r.json(t)["flow"].(map[string]any)
	c := f["consent"].(map[string]any)
	if c["status"] != "Expired" || f["status"] != "completed" || f["version"] != 3.0 {
		t.Fatalf("expired: %s", r.body)
	}
	if s, _ := c["expiredAt"].(string); !apiTimeRE.MatchString(s) {
		t.Fatalf("expiredAt %v", c["expiredAt"])
	}
	if n := e.count(t, `select count(*) from test_events where kind = 'flow.expired' and flow_id = $1 and status = 'Expired' and version = 3`, id); n != 1 {
		t.Fatalf("%d flow.expired events, want 1", n)
	}
	list := e.call(t, "GET", "/api/flows?archived=true&status=Expired", tokA, "").json(t)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != id {
		t.Fatalf("expired flows: %v", list)
	}
	if r := e.call(t, "GET", "/api/flows?archived=true&status=Expired", tokB, ""); len(r.json(t)["data"].([]any)) != 0 {
		t.Fatalf("another organization's expired flows: %s", r.body)
	}
	if r := e.call(t, "POST", "/api/flows/"+id+"/withdraw", tokA, `{"reason":"Too late."}`); r.status != http.StatusConflict {
		t.Fatalf("withdrawing an expired acceptance: %d %s", r.status, r.body)
	}
}
