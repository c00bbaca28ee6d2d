package flows_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows"
)

// TestFlowWritesRunTheirBeforeCommitWork: Cancel and Delete run the caller's
// work in their transaction with what they did; when it fails, nothing of
// the change stays (state, tasks, consent link, events, deletion log), and
// when it succeeds, both the change and the work's own write commit.
func TestFlowWritesRunTheirBeforeCommitWork(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	caller := flows.Caller{OrganizationID: "org-a", ClientID: "staff:ada"}
	create := func(t *testing.T) flows.Created {
		c, err := e.flows.Create(ctx, caller, newFlow("ID-777"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	refused := errors.New("the audit log refused the entry")
	// probe is the caller's own write in the transaction: a row of test_events.
	probe := func(ctx context.Context, tx database.Tx, flowID string) error {
		_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('probe', $1)`, flowID)
		return err
	}
	events := func(t *testing.T, flowID, kind string) int {
		return e.count(t, `select count(*) from test_events where flow_id = $1 and kind = $2`, flowID, kind)
	}

	t.Run("cancel", func(t *testing.T) {
		c := create(t)
		_, err := e.flows.Cancel(ctx, caller, c.FlowID, etag.Any, func(context.Context, database.Tx, flows.Flow) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("Cancel with failing work = %v, want its error", err)
		}
		f, err := e.flows.Get(ctx, caller, c.FlowID)
		if err != nil || f.ProcessStatus != flows.Active || f.ConsentURL == "" {
			t.Fatalf("after a failed cancel: %+v %v, want the flow active with its link", f, err)
		}
		if n := events(t, c.FlowID, "flow.cancelled"); n != 0 {
			t.Fatalf("%d flow.cancelled events of a cancel that failed", n)
		}
		tasks, err := e.flows.Tasks(ctx, caller, c.FlowID)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if task.Status == flows.TaskCancelled {
				t.Fatalf("task %s cancelled by a cancel that failed", task.TaskType)
			}
		}

		var seen flows.Flow
		got, err := e.flows.Cancel(ctx, caller, c.FlowID, etag.Any, func(ctx context.Context, tx database.Tx, f flows.Flow) error {
			seen = f
			return probe(ctx, tx, f.ID)
		})
		if err != nil || got.ProcessStatus != flows.Cancelled {
			t.Fatalf("Cancel = %+v %v", got, err)
		}
		if seen.ID != c.FlowID || seen.ReferenceID != c.ReferenceID || seen.ProcessStatus != flows.Cancelled {
			t.Fatalf("the work saw %+v, want the cancelled flow", seen)
		}
		if events(t, c.FlowID, "probe") != 1 || events(t, c.FlowID, "flow.cancelled") != 1 {
			t.Fatal("the cancel and the work's write did not both commit")
		}
	})

	t.Run("delete", func(t *testing.T) {
		c := create(t)
		_, err := e.flows.Delete(ctx, caller, c.FlowID, etag.Any, func(context.Context, database.Tx, flows.Deletion) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("Delete with failing work = %v, want its error", err)
		}
		f, err := e.flows.Get(ctx, caller, c.FlowID)
		if err != nil || f.ConsentURL == "" || f.NationalID != "ID-777" {
			t.Fatalf("after a failed delete: %+v %v, want the flow with its link and personal data", f, err)
		}
		if n := events(t, c.FlowID, "flow.deleted") + events(t, c.FlowID, "cancel-pending"); n != 0 {
			t.Fatalf("%d events of a delete that failed", n)
		}
		if log, _, err := e.flows.Deletions(ctx, "org-a", 10, ""); err != nil || len(log) != 0 {
			t.Fatalf("deletion log after a failed delete: %+v %v", log, err)
		}

		var seen flows.Deletion
		d, err := e.flows.Delete(ctx, caller, c.FlowID, etag.Any, func(ctx context.Context, tx database.Tx, d flows.Deletion) error {
			seen = d
			return probe(ctx, tx, d.FlowID)
		})
		if err != nil || !reflect.DeepEqual(seen, d) || d.ReferenceID != c.ReferenceID || d.DeletedBy != "staff:ada" {
			t.Fatalf("Delete = %+v %v; the work saw %+v", d, err, seen)
		}
		if _, err := e.flows.Get(ctx, caller, c.FlowID); !errors.Is(err, flows.ErrNotFound) {
			t.Fatalf("after the delete: %v, want ErrNotFound", err)
		}
		if events(t, c.FlowID, "probe") != 1 || events(t, c.FlowID, "flow.deleted") != 1 {
			t.Fatal("the delete and the work's write did not both commit")
		}
	})
}
