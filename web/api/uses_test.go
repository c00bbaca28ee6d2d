package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// TestRecordingAndListingUses walks the use ledger over HTTP: who may
// record and read, what is refused with which status (and the refusals of
// consents not in force audited), an idempotent replay, paging, and the
// flow's consent.numUses and consent.lastUsedAt. Every answer is checked
// against the OpenAPI document by the environment.
func TestRecordingAndListingUses(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	accepted := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/flowd", "flowDefinitionId": e.validFor90Days(t)})
	e.decideWithEvidence(t, accepted, true)
	open := e.Create(t, webtest.TokA, nil)
	withdrawn := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "loan"})
	e.decideWithEvidence(t, withdrawn, true)
	if r := e.Call(t, "POST", "/api/flows/"+withdrawn+"/withdraw", webtest.TokA, `{"reason":"Asked by phone."}`); r.Status != http.StatusOK {
		t.Fatalf("withdraw: %d %s", r.Status, r.Body)
	}
	expired := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "loan"})
	e.decideWithEvidence(t, expired, true)
	if _, err := e.Pool.Exec(ctx, `update flows set valid_until = now() - interval '1 second' where id = $1`, expired); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Flows.ExpireDueAcceptances(ctx, 10); err != nil {
		t.Fatal(err)
	}
	use := `{"action":"fetched income 2025","dataCategories":["Income"],"reference":"case 4711"}`
	for _, c := range []struct {
		name, id, token, body string
		status                int
		problem               string
	}{
		{"without flows:write", accepted, webtest.TokARead, use, http.StatusForbidden, "insufficient-scope"},
		{"another organization's flow", accepted, webtest.TokB, use, http.StatusNotFound, "not-found"},
		{"no such flow", "00000000-0000-7000-8000-000000000000", webtest.TokA, use, http.StatusNotFound, "not-found"},
		{"no action", accepted, webtest.TokA, `{"action":" "}`, http.StatusBadRequest, "invalid"},
		{"an action too long", accepted, webtest.TokA, `{"action":"` + strings.Repeat("x", 201) + `"}`, http.StatusBadRequest, "invalid"},
		{"an unknown category", accepted, webtest.TokA, `{"action":"a","dataCategories":["Health"]}`, http.StatusBadRequest, "invalid"},
		{"in the future", accepted, webtest.TokA, `{"action":"a","usedAt":"2999-01-01T00:00:00Z"}`, http.StatusBadRequest, "invalid"},
		{"not a time", accepted, webtest.TokA, `{"action":"a","usedAt":"yesterday"}`, http.StatusBadRequest, "invalid"},
		{"an unknown field", accepted, webtest.TokA, `{"action":"a","purpose":"x"}`, http.StatusBadRequest, "invalid"},
		{"an unanswered request", open, webtest.TokA, use, http.StatusConflict, "consent-not-in-force"},
		{"a withdrawn consent", withdrawn, webtest.TokA, use, http.StatusConflict, "consent-not-in-force"},
		{"an expired consent", expired, webtest.TokA, use, http.StatusConflict, "consent-not-in-force"},
	} {
		r := e.Call(t, "POST", "/api/flows/"+c.id+"/uses", c.token, c.body)
		if typ, _ := r.JSON(t)["type"].(string); r.Status != c.status || !strings.HasSuffix(typ, "#problem-"+c.problem) {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.Status, r.Body, c.status, c.problem)
		}
	}
	if n := e.Count(t, `select count(*) from flow_uses`); n != 0 {
		t.Fatalf("refused uses left %d uses", n)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'flow.used'`); n != 0 {
		t.Fatalf("refused uses left %d flow.used events", n)
	}
	for _, c := range []struct{ id, status string }{{open, "Unopened"}, {withdrawn, "Withdrawn"}, {expired, "Expired"}} {
		if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and status = 'flow.use_refused'
			and task_id = 'client:client-a' and url = $1`, "consent "+c.status); n != 1 {
			t.Errorf("%d audit entries of the refused use of a %s consent, want 1", n, c.status)
		}
	}
	if r := e.Call(t, "GET", "/api/flows/"+accepted+"/uses", webtest.TokA, ""); r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"has_more":false,"data":[]}` {
		t.Fatalf("no uses yet: %d %q", r.Status, r.Body)
	}

	// Recorded once, replayed for the same key.
	first := e.Call(t, "POST", "/api/flows/"+accepted+"/uses", webtest.TokA, use, "Idempotency-Key", "use-1")
	u := first.JSON(t)
	if r, ok := u["resource"]; !ok || r != nil {
		t.Errorf("the organization's use has resource %v (present %v), want null", r, ok)
	}
	if first.Status != http.StatusCreated || u["action"] != "fetched income 2025" || u["reference"] != "case 4711" || u["flowId"] != accepted {
		t.Fatalf("record: %d %s", first.Status, first.Body)
	}
	replay := e.Call(t, "POST", "/api/flows/"+accepted+"/uses", webtest.TokA, use, "Idempotency-Key", "use-1")
	if replay.Status != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Body) != string(first.Body) {
		t.Fatalf("replay: %d %s %s", replay.Status, replay.Header, replay.Body)
	}
	if r := e.Call(t, "POST", "/api/flows/"+accepted+"/uses", webtest.TokA, `{"action":"other"}`, "Idempotency-Key", "use-1"); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("the key with another body: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'flow.used' and flow_id = $1 and url = ''`, accepted); n != 1 {
		t.Fatalf("%d flow.used events, want one, not for the flow's webhookUrl", n)
	}
	for i := range 4 {
		if r := e.Call(t, "POST", "/api/flows/"+accepted+"/uses", webtest.TokA, fmt.Sprintf(`{"action":"use %d"}`, i)); r.Status != http.StatusCreated {
			t.Fatalf("use %d: %d %s", i, r.Status, r.Body)
		}
	}

	// The flow counts them.
	f := e.Call(t, "GET", "/api/flows/"+accepted, webtest.TokA, "").JSON(t)["flow"].(map[string]any)
	consent := f["consent"].(map[string]any)
	if consent["numUses"] != 5.0 || consent["lastUsedAt"] == nil || f["version"] != 7.0 {
		t.Fatalf("the flow after 5 uses: version %v, consent %v", f["version"], consent)
	}

	// Two pages of 3 and 2, latest first, and back.
	page := func(query string, token string) ([]string, bool, int) {
		r := e.Call(t, "GET", "/api/flows/"+accepted+"/uses"+query, token, "")
		if r.Status != http.StatusOK {
			return nil, false, r.Status
		}
		var ids []string
		for _, d := range r.JSON(t)["data"].([]any) {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		return ids, r.JSON(t)["has_more"].(bool), r.Status
	}
	one, more, _ := page("?limit=3", webtest.TokARead)
	if len(one) != 3 || !more {
		t.Fatalf("first page: %v, more %v", one, more)
	}
	two, more, _ := page("?limit=3&starting_after="+one[2], webtest.TokARead)
	if len(two) != 2 || more || two[1] != u["id"] {
		t.Fatalf("second page: %v, more %v; want 2 ending with the first use %v", two, more, u["id"])
	}
	back, more, _ := page("?limit=3&ending_before="+two[0], webtest.TokARead)
	if strings.Join(back, ",") != strings.Join(one, ",") || more {
		t.Fatalf("back: %v, more %v; want %v", back, more, one)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?starting_after=x", "?starting_after=" + one[0] + "&ending_before=" + one[1], "?after=1",
		"?starting_after=" + accepted} {
		if _, _, status := page(q, webtest.TokA); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, status)
		}
	}
	if _, _, status := page("", webtest.TokB); status != http.StatusNotFound {
		t.Errorf("another organization's uses: %d, want 404", status)
	}
}
