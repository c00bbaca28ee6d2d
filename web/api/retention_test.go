package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestCompletedFlowsPastTheirRetentionAreErased: a definition's retention
// is published and shown over the API (a bad one refused, naming it), and
// the sweep deletes the completed flows of that definition decided longer
// ago, each with its flow.deleted and deletion log entry, leaving recent,
// active and other definitions' flows; a second sweep finds nothing.
func TestCompletedFlowsPastTheirRetentionAreErased(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithRetention())
	ctx := context.Background()
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "kept", "retention": "P0D"})); r.Status != http.StatusBadRequest ||
		len(r.Fields(t)) != 1 || r.Fields(t)[0] != "retention" {
		t.Fatalf("a zero retention: %d %s", r.Status, r.Body)
	}
	r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "kept", "retention": "P1Y"}))
	if r.Status != http.StatusCreated || r.JSON(t)["retention"] != "P1Y" {
		t.Fatalf("publish with a retention: %d %s", r.Status, r.Body)
	}
	old := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "kept"})
	recent := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "kept"})
	active := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "kept"})
	otherDefinition := e.Create(t, webtest.TokA, nil)
	for _, id := range []string{old, recent, otherDefinition} {
		e.decideWithEvidence(t, id, true)
	}
	if _, err := e.Pool.Exec(ctx, `update flows set decided_at = now() - interval '13 months', created_at = now() - interval '13 months'
		where id = any($1::uuid[])`, []string{old, otherDefinition}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `update flows set created_at = now() - interval '13 months' where id = $1`, active); err != nil {
		t.Fatal(err)
	}

	n, err := e.Flows.EraseRetained(ctx, time.Now(), 1)
	if err != nil || n != 1 {
		t.Fatalf("the sweep deleted %d flows (%v), want 1", n, err)
	}
	if r := e.Call(t, "GET", "/api/flows/"+old, webtest.TokA, ""); r.Status != http.StatusNotFound {
		t.Errorf("the flow past its retention: %d", r.Status)
	}
	for _, id := range []string{recent, active, otherDefinition} {
		if r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, ""); r.Status != http.StatusOK {
			t.Errorf("flow %s: %d", id, r.Status)
		}
	}
	if n := e.Count(t, `select count(*) from flow_deletions where flow_id = $1 and deleted_by = $2`, old, flows.RetainedBy); n != 1 {
		t.Errorf("%d deletion log entries by retention, want 1", n)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'flow.deleted' and flow_id = $1`, old); n != 1 {
		t.Errorf("%d flow.deleted of the flow past its retention, want 1", n)
	}
	if again, err := e.Flows.EraseRetained(ctx, time.Now(), 1); err != nil || again != 0 {
		t.Errorf("a second sweep deleted %d (%v)", again, err)
	}
}
