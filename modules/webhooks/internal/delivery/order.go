package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// HeldRecheck is how long a delivery held behind an earlier one of its
// flow sleeps: the end of that one wakes it, in the transaction that
// records the end, and this only bounds the wait should the wake be lost
// (the endpoint's ordering turned off by an older instance, say).
const HeldRecheck = 15 * time.Minute

// schedulerLead is how early a throttled delivery whose slot lies far
// ahead comes back: River moves a job snoozed for longer than its
// scheduler's interval (5 s) to the queue only at the scheduler's next run,
// so the delivery comes back before its slot and then snoozes the rest,
// which River keeps to the moment.
const schedulerLead = 5 * time.Second

// holdInOrder reports whether a delivery to an ordered endpoint waits for
// an earlier delivery of its flow, marking it held when it does.
func (w *Worker) holdInOrder(ctx context.Context, ev store.Event, p store.Policy) (bool, error) {
	var held bool
	err := database.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		held, err = store.HoldInOrder(ctx, tx, ev.OrganizationID, ev.ID, p)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("webhook order: %w", err)
	}
	return held, nil
}

// throttle takes the delivery's slot of its endpoint's throttle and returns
// the snooze (not an attempt) that waits for it, or nil when it is the
// delivery's turn. A throttled delivery goes behind first attempts, so that
// its endpoint's backlog does not delay other endpoints' deliveries.
func (w *Worker) throttle(ctx context.Context, job *river.Job[Args], ev store.Event, p store.Policy) error {
	now := time.Now()
	slot := p.Slot
	if slot == nil {
		s, err := store.TakeSlot(ctx, w.pool, ev.OrganizationID, p.EndpointID, ev.ID, now, time.Second/time.Duration(p.RateLimit))
		if err != nil {
			return fmt.Errorf("webhook throttle: %w", err)
		}
		if !s.After(now) {
			return nil
		}
		slot = &s
	}
	wait := slot.Sub(now)
	if wait <= 0 {
		if err := store.UseSlot(ctx, w.pool, ev.OrganizationID, ev.ID); err != nil {
			return fmt.Errorf("webhook throttle: %w", err)
		}
		return nil
	}
	w.metrics.throttled.Inc()
	w.demote(ctx, job)
	if wait > schedulerLead {
		wait -= schedulerLead
	}
	return river.JobSnooze(wait)
}

// recordInOrder records an attempt at a delivery to an ordered endpoint
// and, when the delivery has ended, wakes the next delivery of its flow if
// it is held: both in one transaction, so that a crash between them cannot
// leave the next one asleep.
func (w *Worker) recordInOrder(ctx context.Context, a store.Attempt, state, message string, p store.Policy) (store.Recorded, error) {
	var rec store.Recorded
	err := database.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		if rec, err = store.RecordAttempt(ctx, tx, a, state, message, time.Now()); err != nil {
			return err
		}
		if rec.State == store.Pending {
			return nil
		}
		return w.wakeNext(ctx, tx, a.OrganizationID, p)
	})
	return rec, err
}

// wakeNext makes the job of the flow's next delivery to the endpoint due
// now, in tx, when that delivery is held. Only a job River answers as
// available is due: one it is still running (returning its snooze) cannot
// be moved, and one whose snooze was recorded while tx asked for it can be
// answered as scheduled and left so. Then a new job takes its place, and
// the old one, finding a newer job, cancels itself when it wakes.
func (w *Worker) wakeNext(ctx context.Context, tx pgx.Tx, organizationID string, p store.Policy) error {
	next, err := store.ReleaseNext(ctx, tx, organizationID, p)
	if err != nil || next == nil {
		return err
	}
	client := river.ClientFromContext[pgx.Tx](ctx)
	job, err := client.JobRetryTx(ctx, tx, next.JobID)
	switch {
	case err == nil && job.State == rivertype.JobStateAvailable:
		return nil
	case err != nil && !errors.Is(err, rivertype.ErrNotFound):
		return err
	}
	res, err := client.InsertTx(ctx, tx, Args{OrganizationID: organizationID, EventID: next.ID},
		&river.InsertOpts{Queue: Queue, Priority: FirstPriority})
	if err != nil {
		return err
	}
	return store.SetJob(ctx, tx, organizationID, next.ID, res.Job.ID)
}
