package webhooks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// TestWritesRunTheirBeforeCommitWork: RotateSecret, RetryTask, Redeliver
// and Recover run the caller's work (the audit entry) in their transaction
// with what they did; when it fails, nothing changed (the old secret stays,
// the failed event stays failed, no recovery is queued); when it succeeds,
// both the change and the work's own write commit.
func TestWritesRunTheirBeforeCommitWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The workers are not started, so that the retried event stays as the
	// retry left it.
	b := newBundle(t, dbtest.New(t))
	if _, err := b.pool.Exec(ctx, `create table test_probe (what text not null)`); err != nil {
		t.Fatal(err)
	}
	probe := func(ctx context.Context, tx database.Tx, what string) error {
		_, err := tx.Exec(ctx, `insert into test_probe (what) values ($1)`, what)
		return err
	}
	probed := func(t *testing.T, what string) bool {
		var n int
		if err := b.pool.QueryRow(ctx, `select count(*) from test_probe where what = $1`, what).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	refused := errors.New("the audit log refused the entry")

	t.Run("rotate secret", func(t *testing.T) {
		_, err := b.hooks.RotateSecret(ctx, b.org, func(context.Context, database.Tx, webhooks.Secret) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("RotateSecret with failing work = %v, want its error", err)
		}
		if cur, err := b.hooks.CurrentSecret(ctx, b.org); err != nil || cur.Value != b.secret {
			t.Fatalf("after a failed rotation the secret is %q (%v), want the old one", cur.Value, err)
		}
		var seen webhooks.Secret
		s, err := b.hooks.RotateSecret(ctx, b.org, func(ctx context.Context, tx database.Tx, s webhooks.Secret) error {
			seen = s
			return probe(ctx, tx, "rotated")
		})
		if err != nil || seen != s || s.Value == b.secret {
			t.Fatalf("RotateSecret = %q %v; the work saw %q", s.Value, err, seen.Value)
		}
		if cur, err := b.hooks.CurrentSecret(ctx, b.org); err != nil || cur.Value != s.Value || !probed(t, "rotated") {
			t.Fatalf("the rotation and the work's write did not both commit: current %q %v", cur.Value, err)
		}
	})

	t.Run("retry task", func(t *testing.T) {
		publish(t, b.pool, b.hooks, b.event(webhooks.FlowOpened, "flow-1", "https://hooks.example/flowd"))
		id := eventID(t, b.pool, "flow-1", webhooks.FlowOpened)
		// The delivery failed for good.
		if _, err := b.pool.Exec(ctx, `update webhook_events set state = 'failed', finished_at = now() where id = $1`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `update river_job set state = 'discarded', finalized_at = now()
			where id = (select job_id from webhook_events where id = $1)`, id); err != nil {
			t.Fatal(err)
		}
		err := b.hooks.RetryTask(ctx, b.org, "task-flow-1", func(context.Context, database.Tx, webhooks.EventType) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("RetryTask with failing work = %v, want its error", err)
		}
		if ev, job := eventState(t, b.pool, id), jobState(t, b.pool, id); ev != "failed" || job != "discarded" {
			t.Fatalf("after a failed retry: event %s, job %s; want failed, discarded", ev, job)
		}
		var seen webhooks.EventType
		err = b.hooks.RetryTask(ctx, b.org, "task-flow-1", func(ctx context.Context, tx database.Tx, typ webhooks.EventType) error {
			seen = typ
			return probe(ctx, tx, "retried")
		})
		if err != nil || seen != webhooks.FlowOpened {
			t.Fatalf("RetryTask = %v; the work saw %q, want %q", err, seen, webhooks.FlowOpened)
		}
		if ev, job := eventState(t, b.pool, id), jobState(t, b.pool, id); ev != "pending" || job != "available" || !probed(t, "retried") {
			t.Fatalf("the retry and the work's write did not both commit: event %s, job %s", ev, job)
		}
	})

	t.Run("redeliver", func(t *testing.T) {
		publish(t, b.pool, b.hooks, b.event(webhooks.FlowAccepted, "flow-2", "https://hooks.example/flowd"))
		id := eventID(t, b.pool, "flow-2", webhooks.FlowAccepted)
		if _, err := b.pool.Exec(ctx, `update webhook_events set state = 'failed', finished_at = now() where id = $1`, id); err != nil {
			t.Fatal(err)
		}
		_, err := b.hooks.Redeliver(ctx, b.org, id, "", func(context.Context, database.Tx, webhooks.Redelivery) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("Redeliver with failing work = %v, want its error", err)
		}
		if ev := eventState(t, b.pool, id); ev != "failed" {
			t.Fatalf("after a failed redelivery the delivery is %s, want failed", ev)
		}
		var seen webhooks.Redelivery
		n, err := b.hooks.Redeliver(ctx, b.org, id, "", func(ctx context.Context, tx database.Tx, r webhooks.Redelivery) error {
			seen = r
			return probe(ctx, tx, "redelivered")
		})
		want := webhooks.Redelivery{EventID: id, Type: webhooks.FlowAccepted, FlowID: "flow-2", Deliveries: 1}
		if err != nil || n != 1 || seen != want {
			t.Fatalf("Redeliver = %d, %v; the work saw %+v, want %+v", n, err, seen, want)
		}
		if ev := eventState(t, b.pool, id); ev != "pending" || !probed(t, "redelivered") {
			t.Fatalf("the redelivery and the work's write did not both commit: delivery %s", ev)
		}
	})

	t.Run("recover", func(t *testing.T) {
		ep := b.newEndpoint(t, "https://hooks.example/recover")
		since := time.Now().Add(-time.Hour)
		_, err := b.hooks.Recover(ctx, b.org, ep.ID, since, "staff:ada", func(context.Context, database.Tx, webhooks.Recovery) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("Recover with failing work = %v, want its error", err)
		}
		if list, err := b.hooks.Recoveries(ctx, b.org, ep.ID); err != nil || len(list) != 0 {
			t.Fatalf("after a failed request: %+v %v, want no recovery", list, err)
		}
		var seen webhooks.Recovery
		r, err := b.hooks.Recover(ctx, b.org, ep.ID, since, "staff:ada", func(ctx context.Context, tx database.Tx, r webhooks.Recovery) error {
			seen = r
			return probe(ctx, tx, "recovered")
		})
		if err != nil || seen.ID != r.ID || seen.State != webhooks.RecoveryQueued {
			t.Fatalf("Recover = %+v, %v; the work saw %+v", r, err, seen)
		}
		if list, err := b.hooks.Recoveries(ctx, b.org, ep.ID); err != nil || len(list) != 1 || !probed(t, "recovered") {
			t.Fatalf("the request and the work's write did not both commit: %+v %v", list, err)
		}
	})
}
