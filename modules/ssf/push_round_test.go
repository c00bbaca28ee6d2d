package ssf_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/ssf"
)

func TestPushBackoffHoldsAgainstNewSETs(t *testing.T) {
	t.Parallel()
	schedule := []time.Duration{time.Second, time.Second}
	b := setup(t, func(o *ssf.Options) { o.Schedule = schedule })
	r := newReceiver(t, b.keys)
	r.setAnswer(func(_ push, n int) (int, string) {
		if n == 1 {
			return http.StatusServiceUnavailable, ""
		}
		return http.StatusAccepted, ""
	})
	b.pushStream(t, r.url())
	start(t, b.m)
	b.revoke(t, "consent-1", 1)
	failed := r.awaitCount(t, 1)[0]

	// SETs put on the stream during its backoff start jobs of their own:
	// none may push it before the backoff ends.
	want := []string{"consent-1.1"}
	for c := 2; c <= 6; c++ {
		b.revoke(t, fmt.Sprintf("consent-%d", c), 1)
		want = append(want, fmt.Sprintf("consent-%d.1", c))
	}
	got := r.awaitCount(t, len(want)+1)
	if gap := got[1].at.Sub(failed.at); gap < schedule[0] {
		t.Errorf("the push after the failure (%s) came %v after it, want at least the backoff %v", got[1].txn, gap, schedule[0])
	}
	if got[1].txn != "consent-1.1" {
		t.Errorf("after the backoff %s came first, want the failed SET consent-1.1", got[1].txn)
	}
	testwait.For(t, "every SET accepted", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= len(want), fmt.Sprintf("accepted %v", txns(acc))
	})
	if broken := orderBroken(txns(r.accepted()), want); broken != "" {
		t.Error(broken)
	}
}

func TestPushEnablingEndsABackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.Schedule = []time.Duration{time.Hour} })
	r := newReceiver(t, b.keys)
	r.setAnswer(failing(http.StatusBadGateway))
	s := b.pushStream(t, r.url())
	start(t, b.m)
	b.revoke(t, "consent-1", 1)
	testwait.For(t, "the failure recorded", func() (bool, string) {
		st := b.stream(t, s.ID)
		return st.Failures == 1, fmt.Sprintf("%d failures", st.Failures)
	})

	// The receiver is fixed and says so: the hour's backoff no longer holds.
	r.setAnswer(nil)
	ctx := context.Background()
	if _, err := b.m.SetStatus(ctx, holderOrg, s.ID, ssf.Paused, "fixing"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.SetStatus(ctx, holderOrg, s.ID, ssf.Enabled, "fixed"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the SET pushed again", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= 1, fmt.Sprintf("accepted %v of pushes %v", txns(acc), txns(r.pushes()))
	})
}

func TestPushSendsARoundOfConsentsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.Timeout = time.Minute; o.InFlight = 4 })
	r := newReceiver(t, b.keys)
	r.holdPushes()
	b.pushStream(t, r.url())
	// Made before the workers start, so that one holder finds them all.
	made := []struct {
		consent string
		n       int
	}{{"consent-1", 1}, {"consent-2", 1}, {"consent-3", 1}, {"consent-4", 1}, {"consent-5", 1}, {"consent-1", 2}}
	var want []string
	for _, m := range made {
		b.revoke(t, m.consent, m.n)
		want = append(want, fmt.Sprintf("%s.%d", m.consent, m.n))
	}
	start(t, b.m)

	// The first round is four SETs of four consents, all in flight before
	// the receiver answers any.
	r.awaitCount(t, 4)
	if got := r.pushes(); len(got) != 4 {
		t.Errorf("%d pushes in flight before any was answered (%v), want the round of four", len(got), txns(got))
	}
	r.release()
	testwait.For(t, "every SET accepted", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= len(want), fmt.Sprintf("accepted %v", txns(acc))
	})
	if broken := orderBroken(txns(r.accepted()), want); broken != "" {
		t.Error(broken)
	}
}

func TestPushBurstKeepsEachConsentsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.Schedule = fastSchedule; o.InFlight = 8 })
	r := newReceiver(t, b.keys)
	// One push in nine fails: the rest of its round goes on, its consent waits.
	r.setAnswer(func(_ push, n int) (int, string) {
		if n%9 == 0 {
			return http.StatusInternalServerError, ""
		}
		return http.StatusAccepted, ""
	})
	b.pushStream(t, r.url())
	start(t, b.m)
	const consents, rounds = 20, 4
	var (
		mu   sync.Mutex
		want []string
		g    errgroup.Group
	)
	for c := 1; c <= consents; c++ {
		g.Go(func() error {
			for round := 1; round <= rounds; round++ {
				consent := fmt.Sprintf("consent-%d", c)
				if err := b.tryRevoke(consent, round); err != nil {
					return err
				}
				mu.Lock()
				want = append(want, fmt.Sprintf("%s.%d", consent, round))
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "every SET accepted", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= len(want), fmt.Sprintf("accepted %d of %d", len(acc), len(want))
	})
	if broken := orderBroken(txns(r.accepted()), want); broken != "" {
		t.Error(broken)
	}
}

// TestPushNoSETLeftWhenTheHolderLetsGo puts SETs on a stream in small
// bursts, so that some find the stream held just as its holder lets it go;
// with no resume job to fall back on, each burst must still be delivered.
func TestPushNoSETLeftWhenTheHolderLetsGo(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.ResumeEvery = 24 * time.Hour })
	r := newReceiver(t, b.keys)
	s := b.pushStream(t, r.url())
	start(t, b.m)
	awaitFirstResume(t, b)
	for burst := 1; burst <= 25; burst++ {
		for c := 1; c <= 3; c++ {
			b.revoke(t, fmt.Sprintf("consent-%d", c), burst)
		}
		testwait.For(t, fmt.Sprintf("burst %d acknowledged", burst), func() (bool, string) {
			var left int
			err := b.pool.QueryRow(context.Background(), `select count(*) from ssf_sets where stream_id = $1 and state <> 'acknowledged'`,
				s.ID).Scan(&left)
			return err == nil && left == 0, fmt.Sprintf("%d SETs not acknowledged (%v)", left, err)
		})
	}
}

// TestPushSETWhoseJobFindsTheHolderDoneIsPushed makes a SET, and lets its
// job run to its end, just as the holder has found nothing pending and not
// yet let the stream go: the job finds the stream held and ends, so the
// holder must see the SET once it lets go. No resume job falls back.
func TestPushSETWhoseJobFindsTheHolderDoneIsPushed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.ResumeEvery = 24 * time.Hour })
	r := newReceiver(t, b.keys)
	b.pushStream(t, r.url())
	var once sync.Once
	b.m.OnDrained(func() {
		once.Do(func() {
			if err := b.tryRevoke("consent-2", 1); err != nil {
				t.Error(err)
				return
			}
			saw, ok := testwait.Until(testwait.Deadline(t), func() (bool, string) {
				var done int
				err := b.pool.QueryRow(context.Background(), `select count(*) from ssf_river.river_job
					where kind = 'flowd.ssf_push' and state = 'completed'`).Scan(&done)
				return err == nil && done >= 1, fmt.Sprintf("%d push jobs completed (%v)", done, err)
			})
			if !ok {
				t.Errorf("the second SET's job did not end while the holder held the stream: %s", saw)
			}
		})
	})
	start(t, b.m)
	awaitFirstResume(t, b)
	b.revoke(t, "consent-1", 1)
	testwait.For(t, "both SETs accepted", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= 2, fmt.Sprintf("accepted %v", txns(acc))
	})
}

// awaitFirstResume waits for the resume job's run at the start, after which
// a test with a long ResumeEvery has no safety net.
func awaitFirstResume(t *testing.T, b *bundle) {
	t.Helper()
	testwait.For(t, "the resume job's first run", func() (bool, string) {
		var done int
		err := b.pool.QueryRow(context.Background(), `select count(*) from ssf_river.river_job
			where kind = 'flowd.ssf_resume' and state = 'completed'`).Scan(&done)
		return err == nil && done > 0, fmt.Sprintf("%d runs (%v)", done, err)
	})
}
