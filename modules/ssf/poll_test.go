package ssf_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/ssf"
)

func TestLongPollReturnsOnceASETIsEnqueued(t *testing.T) {
	t.Parallel()
	const bound = time.Minute
	b := setup(t, func(o *ssf.Options) { o.LongPoll = bound })
	s := b.pollStream(t)

	now, err := b.m.Poll(context.Background(), holderOrg, s.ID, ssf.PollRequest{MaxEvents: 10, ReturnImmediately: true})
	if err != nil || len(now.SETs) != 0 {
		t.Fatalf("an immediate poll of an empty stream answered %v, %v; want nothing at once", now, err)
	}

	type answer struct {
		res ssf.PollResult
		err error
		in  time.Duration
	}
	done := make(chan answer, 1)
	began := time.Now()
	go func() {
		res, err := b.m.Poll(context.Background(), holderOrg, s.ID, ssf.PollRequest{MaxEvents: 10})
		done <- answer{res, err, time.Since(began)}
	}()
	b.revoke(t, "consent-1", 1)
	var got answer
	testwait.For(t, "the long poll's answer", func() (bool, string) {
		select {
		case got = <-done:
			return true, ""
		default:
			return false, "still waiting after " + time.Since(began).String()
		}
	})
	if got.err != nil || len(got.res.SETs) != 1 || got.res.MoreAvailable {
		t.Fatalf("the long poll answered %d SETs (more: %v), %v; want the one enqueued", len(got.res.SETs), got.res.MoreAvailable, got.err)
	}
	if got.in >= bound {
		t.Errorf("the long poll took %v, its whole bound: it did not return on the SET", got.in)
	}
}

func TestNoticesSayWhoWasToldAndWhenTheyAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.pollStream(t)
	b.revoke(t, "consent-1", 1)
	ctx := context.Background()

	told, err := b.m.NoticesOf(ctx, bankOrg, "consent-1")
	if err != nil || len(told) != 1 || told[0].DataHolderID != holderOrg || told[0].Acknowledged != nil {
		t.Fatalf("before the poll: %+v, %v; want the data holder told, not yet acknowledged", told, err)
	}
	got, err := b.m.Poll(ctx, holderOrg, s.ID, ssf.PollRequest{MaxEvents: 10, ReturnImmediately: true})
	if err != nil || len(got.SETs) != 1 {
		t.Fatalf("poll: %v, %v", got, err)
	}
	for jti := range got.SETs {
		if _, err := b.m.Poll(ctx, holderOrg, s.ID, ssf.PollRequest{Ack: []string{jti}, ReturnImmediately: true}); err != nil {
			t.Fatal(err)
		}
	}
	told, err = b.m.NoticesOf(ctx, bankOrg, "consent-1")
	if err != nil || len(told) != 1 || told[0].Acknowledged == nil || told[0].Acknowledged.Before(told[0].SentAt) {
		t.Fatalf("after the ack: %+v, %v; want it acknowledged after it was sent", told, err)
	}
	if other, err := b.m.NoticesOf(ctx, "org-other", "consent-1"); err != nil || len(other) != 0 {
		t.Errorf("another organization's consent of the same id: %+v, %v; want none", other, err)
	}
}
