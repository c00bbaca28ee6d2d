package ssf_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowd/flowd/internal/testkit/testlog"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/ssf"
)

func failing(status int) func(push, int) (int, string) {
	return func(push, int) (int, string) { return status, "" }
}

func TestPushRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	schedule := []time.Duration{150 * time.Millisecond, 400 * time.Millisecond, time.Second}
	b := setup(t, func(o *ssf.Options) { o.Schedule = schedule })
	r := newReceiver(t, b.keys)
	r.setAnswer(func(_ push, n int) (int, string) {
		if n <= 2 {
			return http.StatusServiceUnavailable, ""
		}
		return http.StatusAccepted, ""
	})
	s := b.pushStream(t, r.url())
	start(t, b.m)
	b.revoke(t, "consent-1", 1)

	got := r.awaitCount(t, 3)
	for i := 1; i < 3; i++ {
		if got[i].jti != got[0].jti {
			t.Fatalf("push %d carried %s, want the retried SET %s", i+1, got[i].jti, got[0].jti)
		}
		if gap := got[i].at.Sub(got[i-1].at); gap < schedule[i-1] {
			t.Errorf("retry %d came %v after the failure, want at least %v", i, gap, schedule[i-1])
		}
	}
	testwait.For(t, "the SET acknowledged", func() (bool, string) {
		state, _, _ := b.setState(t, got[0].jti)
		return state == "acknowledged", "state " + state
	})
	// The count is reset just after the SET is settled.
	testwait.For(t, "the stream's failures reset", func() (bool, string) {
		st := b.stream(t, s.ID)
		return st.Failures == 0 && st.Status == ssf.Enabled, fmt.Sprintf("%s with %d failures", st.Status, st.Failures)
	})
}

func TestPushPausesAFailingStream(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.PauseAfter = 3; o.Log = testlog.New(t) })
	r := newReceiver(t, b.keys)
	r.setAnswer(failing(http.StatusBadGateway))
	s := b.pushStream(t, r.url())
	start(t, b.m)
	b.revoke(t, "consent-1", 1)

	var st ssf.Stream
	testwait.For(t, "the stream paused", func() (bool, string) {
		st = b.stream(t, s.ID)
		return st.Status == ssf.Paused, fmt.Sprintf("%s after %d failures", st.Status, st.Failures)
	})
	if !strings.Contains(st.StatusReason, "3 failed pushes") || !strings.Contains(st.StatusReason, "HTTP 502") {
		t.Errorf("the reason is %q, want the count and the last failure", st.StatusReason)
	}
	if n := len(r.pushes()); n != 3 {
		t.Errorf("the receiver got %d pushes before the pause, want 3", n)
	}

	// The receiver recovers; enabled again, the stream sends what it held
	// and then the stream-updated event that says why it was paused.
	r.setAnswer(nil)
	if _, err := b.m.SetStatus(context.Background(), holderOrg, s.ID, ssf.Enabled, "fixed"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the held SETs", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= 2, fmt.Sprintf("accepted %v", txns(acc))
	})
	acc := r.accepted()
	if acc[0].txn != "consent-1.1" || acc[1].event != ssf.EventStreamUpdated {
		t.Fatalf("after enabling the receiver got %v, want consent-1.1 then stream-updated", txns(acc))
	}
	ev := acc[1].claims["events"].(map[string]any)[ssf.EventStreamUpdated].(map[string]any)
	if ev["status"] != "paused" || ev["reason"] != st.StatusReason {
		t.Errorf("stream-updated says %v, want status paused with the reason %q", ev, st.StatusReason)
	}
	if sub := acc[1].claims["sub_id"].(map[string]any); sub["id"] != s.ID {
		t.Errorf("stream-updated names %v, want the stream", sub)
	}
}

func TestPushRecordsRejections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t, b.keys)
	r.setAnswer(func(p push, _ int) (int, string) {
		if p.txn == "consent-1.1" {
			return http.StatusBadRequest, `{"err":"invalid_audience","description":"not a stream of ours"}`
		}
		return http.StatusAccepted, ""
	})
	s := b.pushStream(t, r.url())
	start(t, b.m)
	b.revoke(t, "consent-1", 1)
	b.revoke(t, "consent-2", 1)

	got := r.awaitCount(t, 2)
	// The two are of two consents: they may go side by side.
	slices.SortFunc(got, func(x, y push) int { return strings.Compare(x.txn, y.txn) })
	if txns(got)[0] != "consent-1.1" || txns(got)[1] != "consent-2.1" || len(got) != 2 {
		t.Fatalf("the receiver got %v, want consent-1.1 once (rejected for good) and consent-2.1", txns(got))
	}
	testwait.For(t, "both SETs settled", func() (bool, string) {
		s1, code, desc := b.setState(t, got[0].jti)
		s2, _, _ := b.setState(t, got[1].jti)
		return s1 == "rejected" && s2 == "acknowledged", fmt.Sprintf("%s (%q %q), %s", s1, code, desc, s2)
	})
	if _, code, desc := b.setState(t, got[0].jti); code != "invalid_audience" || desc != "not a stream of ours" {
		t.Errorf("the rejection is recorded as %q %q, want the receiver's err and description", code, desc)
	}
	if st := b.stream(t, s.ID); st.Status != ssf.Enabled || st.Failures != 0 {
		t.Errorf("a rejection left the stream %s with %d failures, want enabled with none", st.Status, st.Failures)
	}
}

func TestPushHangingReceiverDelaysOnlyItsStream(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.Timeout = time.Minute })
	hanging, healthy := newReceiver(t, b.keys), newReceiver(t, b.keys)
	hanging.holdPushes()
	b.pushStream(t, hanging.url())
	b.pushStream(t, healthy.url())
	start(t, b.m)
	b.revoke(t, "consent-1", 1)
	hanging.awaitCount(t, 1)
	b.revoke(t, "consent-2", 1)

	testwait.For(t, "the healthy receiver's SETs", func() (bool, string) {
		acc := healthy.accepted()
		return len(acc) == 2, fmt.Sprintf("accepted %v", txns(acc))
	})
	if n := len(hanging.pushes()); n != 1 {
		t.Errorf("the hanging receiver got %d pushes, want its first one, still unanswered", n)
	}
	hanging.release()
	testwait.For(t, "the hanging receiver's SETs once it answers", func() (bool, string) {
		acc := hanging.accepted()
		return len(acc) == 2, fmt.Sprintf("accepted %v", txns(acc))
	})
}

func TestPushKeepsEachConsentsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.Schedule = slices.Repeat(fastSchedule, 3) })
	r := newReceiver(t, b.keys)
	// Every fourth push fails: a retry must not let a later SET pass.
	r.setAnswer(func(_ push, n int) (int, string) {
		if n%4 == 0 {
			return http.StatusInternalServerError, ""
		}
		return http.StatusAccepted, ""
	})
	b.pushStream(t, r.url())
	start(t, b.m)
	var want []string
	for round := 1; round <= 3; round++ {
		for c := 1; c <= 4; c++ {
			consent := fmt.Sprintf("consent-%d", c)
			b.revoke(t, consent, round)
			want = append(want, fmt.Sprintf("%s.%d", consent, round))
		}
	}
	testwait.For(t, "every SET", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= len(want), fmt.Sprintf("accepted %v", txns(acc))
	})
	if broken := orderBroken(txns(r.accepted()), want); broken != "" {
		t.Errorf("each consent's SETs are not in the order made: %s", broken)
	}
}

func TestPushReceiverDownLongerThanTheSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *ssf.Options) { o.Schedule = fastSchedule[:3] })
	r := newReceiver(t, b.keys)
	r.setAnswer(failing(http.StatusServiceUnavailable))
	s := b.pushStream(t, r.url())
	start(t, b.m)
	for c := 1; c <= 3; c++ {
		b.revoke(t, fmt.Sprintf("consent-%d", c), 1)
	}
	testwait.For(t, "the stream paused once the schedule is spent", func() (bool, string) {
		st := b.stream(t, s.ID)
		return st.Status == ssf.Paused, fmt.Sprintf("%s after %d failures, %d pushes", st.Status, st.Failures, len(r.pushes()))
	})
	// Withdrawals go on while it is paused: the stream holds them.
	b.revoke(t, "consent-4", 1)

	r.setAnswer(nil)
	if _, err := b.m.SetStatus(context.Background(), holderOrg, s.ID, ssf.Enabled, ""); err != nil {
		t.Fatal(err)
	}
	want := []string{"consent-1.1", "consent-2.1", "consent-3.1", ssf.EventStreamUpdated, "consent-4.1"}
	testwait.For(t, "everything held", func() (bool, string) {
		acc := r.accepted()
		return len(acc) >= len(want), fmt.Sprintf("accepted %v", txns(acc))
	})
	if broken := orderBroken(txns(r.accepted()), want); broken != "" {
		t.Errorf("after recovery: %s; want the order of %v", broken, want)
	}
	// The receiver's 202 comes before flowd records it.
	testwait.For(t, "every SET acknowledged after recovery", func() (bool, string) {
		var left int
		err := b.pool.QueryRow(context.Background(), `select count(*) from ssf_sets where state <> 'acknowledged'`).Scan(&left)
		return err == nil && left == 0, fmt.Sprintf("%d not acknowledged (%v)", left, err)
	})
}

func TestPushTwoInstancesDeliverEachSETOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t, b.keys)
	b.pushStream(t, r.url())
	other := newModule(t, b.pool, b.signer, b.opts)
	start(t, b.m)
	start(t, other)
	// A burst: five withdrawers side by side.
	const n = 60
	var g errgroup.Group
	for w := range 5 {
		g.Go(func() error {
			for c := w + 1; c <= n; c += 5 {
				if err := b.tryRevoke(fmt.Sprintf("consent-%d", c), 1); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "every SET acknowledged", func() (bool, string) {
		var left int
		err := b.pool.QueryRow(context.Background(), `select count(*) from ssf_sets where state <> 'acknowledged'`).Scan(&left)
		return err == nil && left == 0, fmt.Sprintf("%d left (%v), %d pushes", left, err, len(r.pushes()))
	})
	seen := map[string]int{}
	for _, p := range r.pushes() {
		seen[p.jti]++
	}
	if len(seen) != n || len(r.pushes()) != n {
		t.Errorf("the receiver got %d pushes of %d SETs, want each of %d once", len(r.pushes()), len(seen), n)
	}
}
