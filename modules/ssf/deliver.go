package ssf

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// Push delivery (RFC 8935). Every SET put on an enabled push stream inserts
// a job naming the stream, in the SET's transaction. The job that leases
// the stream's delivery pushes its pending SETs oldest first, up to
// InFlight at once but never two of one consent (nor a stream's own event
// beside any other), so a consent's SETs arrive in order; a receiver that
// hangs holds one worker and delays no other stream.
//
// A job that finds the stream held ends at once: the holder looks for
// pending SETs again after it lets the stream go, and that look sees every
// SET whose job found the stream held, since such a SET committed before
// its job ran. A job that finds a job of its own instance pushing the
// stream ends before any query, for the same reason. After a failed push
// the holder keeps the stream for the backoff and snoozes until it ends,
// so that no job, not even one a new SET started, pushes the stream sooner.

// pendingPage is how many pending SETs a holder reads at a time.
const pendingPage = 100

// leaseSlack is how long past a dead holder's lease a resumed job looks again.
const leaseSlack = 100 * time.Millisecond

// outcome is how a holder's pushing ended.
type outcome int

const (
	drained  outcome = iota // nothing pending
	handOver                // the job pushed its share: a new job goes on
	failing                 // a push failed
	backOff                 // the stream is held until its retry
	stopped                 // the stream was paused, changed or taken over
)

// lease is how long a holder holds a stream between renewals: a round of
// pushes and its bookkeeping.
func (m *Module) lease() time.Duration { return m.opts.Timeout + 5*time.Second }

// Work pushes a stream's pending SETs.
func (w *pushWorker) Work(ctx context.Context, job *river.Job[pushArgs]) error {
	m, a := w.m, job.Args
	pushed := 0
	for {
		// A job of this instance pushes the stream and will look for
		// pending SETs once it lets go, without a query of this one's.
		if m.active.has(a.StreamID) {
			return nil
		}
		s, ok, err := store.Lease(ctx, m.workers, a.OrganizationID, a.StreamID, job.ID, m.lease())
		if err != nil {
			return err
		}
		if !ok {
			return m.notLeased(ctx, job)
		}
		h := &holder{m: m, s: s, job: job.ID, pushed: &pushed}
		out, msg, err := h.pushActive(ctx)
		if err == nil && out == failing {
			var wait time.Duration
			if out, wait, err = h.failed(ctx, msg); err == nil && out == backOff {
				return river.JobSnooze(wait)
			}
		}
		if rerr := store.Release(context.WithoutCancel(ctx), m.workers, a.OrganizationID, a.StreamID, job.ID); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		if out == handOver {
			_, err := m.river.Insert(ctx, pushArgs{OrganizationID: a.OrganizationID, StreamID: a.StreamID},
				&river.InsertOpts{Queue: pushQueue})
			return err
		}
		// A SET whose job found the stream held is seen now; a stream that
		// was paused or is held by another is left to them.
		more, err := store.Pending(ctx, m.workers, a.OrganizationID, a.StreamID, 1)
		if err != nil || len(more) == 0 {
			return err
		}
	}
}

// notLeased is what a job that found its stream not leasable does. Most
// end: another job holds the stream and will look for their SETs, or it is
// paused, disabled, polled or gone. A job that snoozed through its backoff
// and woke before it ended by the database's clock snoozes again; a job
// the resume job started waits for the lease it found, which may be a dead
// instance's.
func (m *Module) notLeased(ctx context.Context, job *river.Job[pushArgs]) error {
	a := job.Args
	if !a.Resume && !snoozed(job) {
		return nil
	}
	h, ok, err := store.Holding(ctx, m.workers, a.OrganizationID, a.StreamID)
	if err != nil || !ok || h.Job == 0 {
		return err
	}
	switch {
	case h.Job == job.ID && h.Backoff:
		return river.JobSnooze(h.Left)
	case a.Resume && !h.Backoff:
		return river.JobSnooze(h.Left + leaseSlack)
	}
	return nil
}

// snoozed reports whether job has snoozed before.
func snoozed(job *river.Job[pushArgs]) bool {
	var md struct {
		Snoozes int `json:"snoozes"`
	}
	return json.Unmarshal(job.Metadata, &md) == nil && md.Snoozes > 0
}

// holder pushes a stream its job leased.
type holder struct {
	m      *Module
	s      store.Stream
	job    int64
	pushed *int // by the job, across its leases
}

// pushActive is push with the stream marked active in this instance until
// it returns, which is before the holder backs off or lets the stream go.
func (h *holder) pushActive(ctx context.Context) (outcome, string, error) {
	h.m.active.enter(h.s.ID)
	defer h.m.active.leave(h.s.ID)
	return h.push(ctx)
}

// active counts, for each stream, the jobs of this instance that push it.
type active struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *active) enter(stream string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[stream]++
}

func (a *active) leave(stream string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[stream]--; a.n[stream] <= 0 {
		delete(a.n, stream)
	}
}

func (a *active) has(stream string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[stream] > 0
}

// push pushes the stream's pending SETs, a round at a time, until none is
// left, a push fails (failing, with what it met), the stream is no longer
// the job's, or the job has pushed its share.
func (h *holder) push(ctx context.Context) (outcome, string, error) {
	m, s := h.m, h.s
	failures := s.Failures
	for *h.pushed < pushPerJob {
		pending, err := store.Pending(ctx, m.workers, s.OrganizationID, s.ID, pendingPage)
		if err != nil || len(pending) == 0 {
			if err == nil && m.onDrained != nil {
				m.onDrained()
			}
			return drained, "", err
		}
		for len(pending) > 0 && *h.pushed < pushPerJob {
			// A receiver that failed last is tried with one SET.
			width := m.opts.InFlight
			if failures > 0 {
				width = 1
			}
			round := nextRound(pending, width)
			pending = pending[len(round):]
			*h.pushed += len(round)
			acked, failed, err := m.record(ctx, s, m.pushRound(ctx, s, round))
			if err != nil || failed != "" {
				return failing, failed, err
			}
			if failures > 0 && acked > 0 {
				if _, err := store.RecordOutcome(ctx, m.workers, s.OrganizationID, s.ID, false, ""); err != nil {
					return 0, "", err
				}
				failures = 0
			}
			held, err := store.Renew(ctx, m.workers, s.OrganizationID, s.ID, h.job, m.lease())
			if err != nil || !held {
				return stopped, "", err
			}
		}
	}
	return handOver, "", nil
}

// failed counts a failed round against the stream: past the schedule or
// PauseAfter it pauses the stream, else it holds the stream for the
// backoff its failures in a row call for.
func (h *holder) failed(ctx context.Context, msg string) (outcome, time.Duration, error) {
	m, s := h.m, h.s
	failures, err := store.RecordOutcome(ctx, m.workers, s.OrganizationID, s.ID, true, msg)
	if err != nil {
		return 0, 0, err
	}
	if failures >= m.opts.PauseAfter || failures > len(m.opts.Schedule) {
		// Enabling it again starts a new job.
		return stopped, 0, m.pauseFailing(ctx, s, failures, msg)
	}
	wait := schedule(m.opts.Schedule).after(failures)
	held, err := store.Backoff(ctx, m.workers, s.OrganizationID, s.ID, h.job, failures, wait)
	if err != nil || !held {
		return stopped, 0, err
	}
	return backOff, wait, nil
}

// nextRound returns the SETs at the head of pending that may be pushed at
// once: at most width, each of another consent. A stream's own event
// (verification, stream-updated) goes alone, in order with all others.
func nextRound(pending []store.SET, width int) []store.SET {
	if pending[0].ConsentID == "" {
		return pending[:1]
	}
	seen := make(map[[2]string]bool, width)
	n := 0
	for ; n < len(pending) && n < width; n++ {
		k := [2]string{pending[n].SourceOrganizationID, pending[n].ConsentID}
		if k[1] == "" || seen[k] {
			break
		}
		seen[k] = true
	}
	return pending[:n]
}

// pushResult is what one push came to.
type pushResult struct {
	set    store.SET
	status int
	body   errorBody
	err    error
}

// pushRound posts round's SETs side by side.
func (m *Module) pushRound(ctx context.Context, s store.Stream, round []store.SET) []pushResult {
	out := make([]pushResult, len(round))
	one := func(i int) {
		out[i].set = round[i]
		out[i].status, out[i].body, out[i].err = m.send(ctx, s, round[i].JWS)
	}
	if len(round) == 1 {
		one(0)
		return out
	}
	var wg sync.WaitGroup
	for i := range round {
		wg.Go(func() { one(i) })
	}
	wg.Wait()
	return out
}

// record stores what a round's pushes came to: a 2xx acknowledges a SET, a
// 400 with an error body rejects it for good (the receiver will never take
// it), anything else is a failed attempt. It returns how many were
// acknowledged and what the first failure met ("" when none failed).
func (m *Module) record(ctx context.Context, s store.Stream, round []pushResult) (int, string, error) {
	acked := map[int][]string{} // by status, so that one statement settles most rounds
	n, failed := 0, ""
	for _, p := range round {
		st := p.status
		switch {
		case p.err == nil && st >= 200 && st < 300:
			acked[st] = append(acked[st], p.set.JTI)
			n++
		case p.err == nil && st == http.StatusBadRequest && p.body.Err != "":
			if _, err := store.Settle(ctx, m.workers, s.OrganizationID, s.ID, []string{p.set.JTI}, &st, p.body.Err, p.body.Description); err != nil {
				return 0, "", err
			}
		default:
			msg := failure(p)
			var status *int
			if st != 0 {
				status = &st
			}
			if err := store.FailAttempt(ctx, m.workers, s.OrganizationID, s.ID, p.set.JTI, status, msg); err != nil {
				return 0, "", err
			}
			if failed == "" {
				failed = msg
			}
		}
	}
	for st, jtis := range acked {
		if _, err := store.Settle(ctx, m.workers, s.OrganizationID, s.ID, jtis, &st, "", ""); err != nil {
			return 0, "", err
		}
	}
	return n, failed, nil
}

// failure says what a failed push met.
func failure(p pushResult) string {
	msg := fmt.Sprintf("HTTP %d", p.status)
	if p.err != nil {
		msg = p.err.Error()
	} else if p.body.Err != "" {
		msg += ": " + p.body.Err + " " + p.body.Description
	}
	return truncate(msg, 500)
}
