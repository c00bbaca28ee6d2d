package api_test

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
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/webtest"
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
	r := e.Call(t, "GET", "/api/flows?"+query, webtest.TokA, "")
	var p listPage
	if r.Status != 200 || json.Unmarshal(r.Body, &p) != nil {
		t.Fatalf("?%s: %d %s", query, r.Status, r.Body)
	}
	return p
}

func TestPaginationWalksBothWaysWithoutGapsOrRepeats(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	caller := flows.Caller{OrganizationID: webtest.OrgA, ClientID: "seed"}
	ids := make([]string, 250)
	webtest.Parallel(len(ids), 4, func(i int) {
		c, err := e.Flows.Create(ctx, caller, flows.NewFlow{NationalID: fmt.Sprintf("ID-%d", i), LastName: "N",
			RedirectURL: "https://bank.example/"})
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
	if _, err := e.Pool.Exec(ctx, `update flows set created_at = to_timestamp($1::float8 - flow_number % 40)`,
		time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:30] {
		if _, err := e.Flows.Cancel(ctx, caller, id, etag.Any); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[30:45] {
		if err := database.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
			_, err := e.Flows.MarkOpenedTx(ctx, tx, webtest.OrgA, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	expected := func(where string) []string {
		rows, err := e.Pool.Query(ctx, `select id::text from flows where `+where+` order by created_at desc, id desc`)
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
	err := database.WithTx(ctx, e.Pool, func(tx pgx.Tx) error {
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
	webtest.Parallel(50, 50, func(i int) {
		body := webtest.CreateBody(map[string]any{"nationalId": fmt.Sprintf("C-%d", i)})
		r := e.Call(t, "POST", "/api/flows", webtest.TokA, body)
		// An overloaded machine may answer 503 (try again); a client does,
		// under the same Idempotency-Key, until the test's deadline.
		for key := fmt.Sprintf("create-%d", i); r.Status == 503 && time.Now().Before(testwait.Deadline(t)); {
			r = e.Call(t, "POST", "/api/flows", webtest.TokA, body, "Idempotency-Key", key)
		}
		if r.Status != 201 {
			t.Errorf("create %d: %d %s", i, r.Status, r.Body)
			return
		}
		var c struct{ FlowID, ReferenceID string }
		_ = json.Unmarshal(r.Body, &c)
		mu.Lock()
		refs[c.ReferenceID] = true
		mu.Unlock()
	})
	rows, err := e.Pool.Query(context.Background(), `select flow_number::text from flows where organization_id = $1`, webtest.OrgA)
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
	if r := e.Call(t, "POST", "/api/flows", webtest.TokB, webtest.CreateBody(map[string]any{"redirectUrl": "https://beta.example/"})); !strings.Contains(string(r.Body), `"BETA-1"`) {
		t.Fatalf("B's first flow: %s", r.Body)
	}
}

// leftovers counts the rows a failed create might have left behind.
func (e *apiEnv) leftovers(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("flows=%d tasks=%d consent=%d keys=%d events=%d",
		e.Count(t, `select count(*) from flows`), e.Count(t, `select count(*) from flow_tasks`),
		e.Count(t, `select count(*) from consent_requests`), e.Count(t, `select count(*) from api_idempotency_keys`),
		e.Count(t, `select count(*) from test_events`))
}

func TestACrashBeforeCommitLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	const empty = "flows=0 tasks=0 consent=0 keys=0 events=0"

	// The last write of the transaction, the event, fails: the API answers 500
	// and everything written before it is rolled back.
	e.Events.Publish = func(context.Context, webhooks.Event) error { return errors.New("disk full") }
	r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"webhookUrl": "https://hooks.example/h"}), "Idempotency-Key", "k1")
	if r.Status != 500 || strings.Contains(string(r.Body), "disk full") {
		t.Fatalf("failing publisher: %d %s", r.Status, r.Body)
	}
	if got := e.leftovers(t); got != empty {
		t.Fatalf("after a failed publish: %s", got)
	}

	// The process dies mid-transaction: here its context ends after every
	// insert but before the commit.
	ctx, cancel := context.WithCancel(context.Background())
	e.Events.Publish = func(context.Context, webhooks.Event) error { cancel(); return nil }
	_, err := e.Flows.Create(ctx, flows.Caller{OrganizationID: webtest.OrgA, ClientID: "c"}, flows.NewFlow{NationalID: "X1", LastName: "N",
		RedirectURL: "https://bank.example/", WebhookURL: "https://hooks.example/h"})
	if err == nil {
		t.Fatal("a create whose context ended before the commit succeeded")
	}
	if got := e.leftovers(t); got != empty {
		t.Fatalf("after a cancelled context: %s", got)
	}

	// The same key then works: the failed attempts did not hold it.
	e.Events.Publish = nil
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"webhookUrl": "https://hooks.example/h"}), "Idempotency-Key", "k1"); r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after the crash: %d %s", r.Status, r.Body)
	}
	if got := e.leftovers(t); got != "flows=1 tasks=2 consent=1 keys=1 events=1" {
		t.Fatalf("after the retry: %s", got)
	}
}

// flowJSON returns the retrieved flow object.
func (e *apiEnv) flowJSON(t *testing.T, id string) map[string]any {
	t.Helper()
	r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "")
	if r.Status != 200 {
		t.Fatalf("get %s: %d %s", id, r.Status, r.Body)
	}
	return r.JSON(t)["flow"].(map[string]any)
}

// TestIdempotencyKeyOverHTTP: a replay answers 201 with the first body,
// Location and Idempotent-Replayed: true, also after the flow was deleted
// (within the key's 24 hours); the key with another body answers 422.
func TestIdempotencyKeyOverHTTP(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	body := webtest.CreateBody(map[string]any{"webhookUrl": "https://hooks.example/h"})
	first := e.Call(t, "POST", "/api/flows", webtest.TokA, body, "Idempotency-Key", "order-42")
	if first.Status != 201 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	// The same body, formatted differently, replays the first response.
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	indented, _ := json.MarshalIndent(m, "", "  ")
	replayed := func(what, body string) {
		t.Helper()
		r := e.Call(t, "POST", "/api/flows", webtest.TokA, body, "Idempotency-Key", "order-42")
		if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(first.Body) ||
			r.Header.Get("Location") != first.Header.Get("Location") {
			t.Fatalf("%s: %d %q %s\nwant the first response\n%s", what, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body, first.Body)
		}
	}
	replayed("replay", string(indented))
	if r := e.Call(t, "DELETE", "/api/flows/"+first.JSON(t)["flowId"].(string), webtest.TokA, ""); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	replayed("replay after delete", body)
	r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"lastName": "Other"}), "Idempotency-Key", "order-42")
	if r.Status != 422 || !strings.Contains(string(r.Body), "/docs#problem-idempotency-key-reused") {
		t.Fatalf("other body: %d %s", r.Status, r.Body)
	}
}

// TestIncidentsAreShownOnTheFlow: an open incident of a delivery task is in
// the retrieved flow's incidents, keyed by its id.
func TestIncidentsAreShownOnTheFlow(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	var taskID string
	if err := e.Pool.QueryRow(context.Background(), `select task_id from test_events where flow_id = $1`, id).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	const msg = "hooks.example: 502 Bad Gateway"
	if err := taskreports.New(e.Pool).TaskFailing(context.Background(), webtest.OrgA, taskID, msg); err != nil {
		t.Fatal(err)
	}
	f := e.flowJSON(t, id)
	incidents := f["incidents"].(map[string]any)
	if f["version"] != 2.0 || f["hasIncidents"] != true || f["hasErrors"] != false || len(incidents) != 1 {
		t.Fatalf("with an incident: %v", f)
	}
	for key, v := range incidents {
		inc := v.(map[string]any)
		if webtest.KeysOf(inc) != "id,message,taskCategory,taskType" || inc["id"] != key || inc["message"] != msg ||
			inc["taskType"] != "send-initiate-webhook" || inc["taskCategory"] != "incident" {
			t.Fatalf("incident %v", inc)
		}
	}
}

func FuzzCreateFlowBody(f *testing.F) {
	for _, seed := range []string{
		webtest.CreateBody(nil),
		webtest.CreateBody(map[string]any{"webhookUrl": "https://hooks.example/h", "referenceName": "R"}),
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
		r := e.Call(t, "POST", "/api/flows", webtest.TokA, body)
		switch r.Status {
		case 201:
			var in, created map[string]any
			if json.Unmarshal([]byte(body), &in) != nil {
				t.Fatalf("201 for a body that is not a JSON object: %q", body)
			}
			_ = json.Unmarshal(r.Body, &created)
			g := e.Call(t, "GET", "/api/flows/"+fmt.Sprint(created["flowId"]), webtest.TokA, "")
			if g.Status != 200 {
				t.Fatalf("created flow not retrievable: %d", g.Status)
			}
			data := g.JSON(t)["flow"].(map[string]any)["data"].(map[string]any)
			if data["nationalId"] != strings.TrimSpace(fmt.Sprint(in["nationalId"])) {
				t.Fatalf("stored %v for %v", data["nationalId"], in["nationalId"])
			}
		case 400:
			var p httpkit.Problem
			if json.Unmarshal(r.Body, &p) != nil || p.Status != 400 || len(p.Errors) == 0 {
				t.Fatalf("400 without named fields for %q: %s", body, r.Body)
			}
		case 413, 415:
		default:
			t.Fatalf("status %d for %q: %s", r.Status, body, r.Body)
		}
	})
}

func TestALostDatabaseAnswers503(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, nil)
	e.Proxy.Cut()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/flows", webtest.CreateBody(nil)},
		{"GET", "/api/flows", ""},
		{"GET", "/api/flows/" + id, ""},
		{"DELETE", "/api/flows/" + id, ""},
	} {
		r := e.Call(t, c.method, c.path, webtest.TokA, c.body)
		if r.Status != 503 || r.Header.Get("Retry-After") == "" || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s with the database gone: %d %q %s", c.method, c.path, r.Status, r.Header.Get("Retry-After"), r.Body)
		}
	}
	e.Proxy.Restore()
	deadline := testwait.Deadline(t)
	for e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "").Status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the API did not recover")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestWithdrawingAnAcceptedConsent(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	accepted := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/flowd"})
	rejected, open := e.Create(t, webtest.TokA, nil), e.Create(t, webtest.TokA, nil)
	e.decideWithEvidence(t, accepted, true)
	e.decideWithEvidence(t, rejected, false)
	reason := `{"reason":"The customer withdrew by phone, case 4711."}`

	for _, c := range []struct {
		name, id, token, body string
		status                int
	}{
		{"no reason", accepted, webtest.TokA, `{"reason":"  "}`, http.StatusBadRequest},
		{"a reason too long", accepted, webtest.TokA, `{"reason":"` + strings.Repeat("x", 401) + `"}`, http.StatusBadRequest},
		{"a reason with a right-to-left override", accepted, webtest.TokA, `{"reason":"Asked by phone \u202E"}`, http.StatusBadRequest},
		{"without flows:write", accepted, webtest.TokARead, reason, http.StatusForbidden},
		{"another organization's flow", accepted, webtest.TokB, reason, http.StatusNotFound},
		{"a rejected consent", rejected, webtest.TokA, reason, http.StatusConflict},
		{"an undecided one", open, webtest.TokA, reason, http.StatusConflict},
	} {
		if r := e.Call(t, "POST", "/api/flows/"+c.id+"/withdraw", c.token, c.body); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	if n := e.Count(t, `select count(*) from test_events where kind in ('flow.withdrawn', 'audit')`); n != 0 {
		t.Fatalf("refused withdrawals left %d events or audit entries", n)
	}

	r := e.Call(t, "POST", "/api/flows/"+accepted+"/withdraw", webtest.TokA, reason)
	f := r.JSON(t)["flow"].(map[string]any)
	consent := f["consent"].(map[string]any)
	if r.Status != http.StatusOK || consent["status"] != "Withdrawn" || consent["withdrawnAt"] == nil || f["version"] != 3.0 {
		t.Fatalf("withdraw: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'flow.withdrawn' and flow_id = $1 and status = 'Withdrawn' and version = 3`, accepted); n != 1 {
		t.Fatalf("%d flow.withdrawn events", n)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and status = 'flow.withdraw' and task_id = 'client:client-a'
		and url = 'The customer withdrew by phone, case 4711.'`); n != 1 {
		t.Fatalf("%d audit entries of the withdrawal", n)
	}
	if r := e.Call(t, "POST", "/api/flows/"+accepted+"/withdraw", webtest.TokA, reason); r.Status != http.StatusConflict {
		t.Fatalf("withdrawing twice: %d", r.Status)
	}
	list := e.Call(t, "GET", "/api/flows?archived=true&status=Withdrawn", webtest.TokA, "").JSON(t)["data"].([]any)
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
	id := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/flowd", "flowDefinitionId": e.validFor90Days(t)})
	e.decideWithEvidence(t, id, true)
	consentOf := func() map[string]any {
		r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "")
		if r.Status != http.StatusOK {
			t.Fatalf("retrieve: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["flow"].(map[string]any)["consent"].(map[string]any)
	}
	if c := consentOf(); c["status"] != "Accepted" || c["validUntil"] == nil || c["expiredAt"] != nil {
		t.Fatalf("accepted: %v", c)
	}
	if n, err := e.Flows.ExpireDueAcceptances(ctx, 10); n != 0 || err != nil {
		t.Fatalf("expiry before the acceptance is due: %d, %v", n, err)
	}
	if _, err := e.Pool.Exec(ctx, `update flows set valid_until = now() - interval '1 second' where id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.Flows.ExpireDueAcceptances(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "")
	f := r.JSON(t)["flow"].(map[string]any)
	c := f["consent"].(map[string]any)
	if c["status"] != "Expired" || f["status"] != "completed" || f["version"] != 3.0 {
		t.Fatalf("expired: %s", r.Body)
	}
	if s, _ := c["expiredAt"].(string); !apiTimeRE.MatchString(s) {
		t.Fatalf("expiredAt %v", c["expiredAt"])
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'flow.expired' and flow_id = $1 and status = 'Expired' and version = 3`, id); n != 1 {
		t.Fatalf("%d flow.expired events, want 1", n)
	}
	list := e.Call(t, "GET", "/api/flows?archived=true&status=Expired", webtest.TokA, "").JSON(t)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != id {
		t.Fatalf("expired flows: %v", list)
	}
	if r := e.Call(t, "GET", "/api/flows?archived=true&status=Expired", webtest.TokB, ""); len(r.JSON(t)["data"].([]any)) != 0 {
		t.Fatalf("another organization's expired flows: %s", r.Body)
	}
	if r := e.Call(t, "POST", "/api/flows/"+id+"/withdraw", webtest.TokA, `{"reason":"Too late."}`); r.Status != http.StatusConflict {
		t.Fatalf("withdrawing an expired acceptance: %d %s", r.Status, r.Body)
	}
}
