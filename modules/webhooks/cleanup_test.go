package webhooks

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks/internal/cleanup"
)

// TestCleanup: finished events older than the retention go with their
// attempts; pending and recently finished ones stay, also when they were
// created long ago.
func TestCleanup(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	m, err := New(pool, unusedReporter{t}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = database.WithTx(ctx, pool, func(tx database.Tx) error {
		for _, f := range []string{"old-done", "old-pending", "new-done", "old-redelivered"} {
			ev := Event{Type: FlowCreated, FlowID: f, OrganizationID: "o", Sequence: 1, URL: "https://example.com/h"}
			if err := m.PublishTx(ctx, tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `
		update webhook_events set state = 'delivered', created_at = now() - interval '101 days', finished_at = now() - interval '100 days'
			where flow_id = 'old-done';
		update webhook_events set state = 'delivered', created_at = now() - interval '101 days', finished_at = now() - interval '1 day'
			where flow_id = 'old-redelivered';
		update webhook_events set created_at = now() - interval '100 days' where flow_id = 'old-pending';
		update webhook_events set state = 'failed', finished_at = now() - interval '1 day' where flow_id = 'new-done';
		insert into webhook_attempts (organization_id, event_id, attempted_at, latency_us)
			select organization_id, id, now(), 1 from webhook_events;
		update events set created_at = now() - interval '31 days' where flow_id = 'old-done';`)
	if err != nil {
		t.Fatal(err)
	}
	w := cleanup.NewWorker(pool, DefaultRetention, DefaultEventRetention)
	if err := w.Work(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "select flow_id from webhook_events order by flow_id")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for rows.Next() {
		var f string
		_ = rows.Scan(&f)
		left = append(left, f)
	}
	if want := []string{"new-done", "old-pending", "old-redelivered"}; !slices.Equal(left, want) {
		t.Errorf("events left: %v, want %v", left, want)
	}
	var attempts int
	if err := pool.QueryRow(ctx, "select count(*) from webhook_attempts").Scan(&attempts); err != nil || attempts != 3 {
		t.Errorf("attempts left: %d, %v; want 3", attempts, err)
	}
	// Events go by their own retention: the one older than 30 days.
	var events []string
	rows, err = pool.Query(ctx, "select flow_id from events order by flow_id")
	if err == nil {
		events, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if want := []string{"new-done", "old-pending", "old-redelivered"}; err != nil || !slices.Equal(events, want) {
		t.Errorf("events left: %v, %v; want %v", events, err, want)
	}
}

// unusedReporter is the TaskReporter of a module whose workers never run: a
// report fails the test.
type unusedReporter struct{ t *testing.T }

func (r unusedReporter) TaskSucceeded(_ context.Context, _, taskID string) error {
	r.t.Errorf("unexpected report: %s succeeded", taskID)
	return nil
}

func (r unusedReporter) TaskFailing(_ context.Context, _, taskID, _ string) error {
	r.t.Errorf("unexpected report: %s failing", taskID)
	return nil
}

func (r unusedReporter) TaskFailed(_ context.Context, _, taskID, _ string) error {
	r.t.Errorf("unexpected report: %s failed", taskID)
	return nil
}
