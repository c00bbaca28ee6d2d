package webhooks

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestDisablingRacesDisableOnce: many attempts of two modules that find
// the same endpoint due at the same moment disable it once, and publish
// one endpoint.disabled with one delivery.
func TestDisablingRacesDisableOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var modules []*Module
	for range 2 {
		m, err := New(pool, unusedReporter{t}, Options{DisableAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		modules = append(modules, m)
	}
	eps := NewEndpoints(pool, EndpointRules{})
	dead, err := eps.Create(ctx, "org-r", NewEndpoint{URL: "https://dead.example/h?token=x", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Create(ctx, "org-r", NewEndpoint{URL: "https://watcher.example/h", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update webhook_endpoints set failing_since = now() - interval '2 hours' where id = $1`, dead.ID); err != nil {
		t.Fatal(err)
	}

	const racers = 16
	start := make(chan struct{})
	errs := make(chan error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			_, err := modules[i%2].disableEndpoint(ctx, "org-r", dead.ID, 2*time.Hour, "HTTP 500 Internal Server Error")
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, database.ErrNotFound):
			t.Errorf("disableEndpoint: %v", err)
		}
	}
	var events, deliveries int
	if err := pool.QueryRow(ctx, `select (select count(*) from events where type = 'endpoint.disabled'),
		(select count(*) from webhook_events where type = 'endpoint.disabled')`).Scan(&events, &deliveries); err != nil {
		t.Fatal(err)
	}
	if won != 1 || events != 1 || deliveries != 1 {
		t.Fatalf("%d of %d racers disabled it, %d events, %d deliveries; want 1 each", won, racers, events, deliveries)
	}
}

func TestSpellDuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 seconds"},
		{time.Second, "1 second"},
		{2500 * time.Millisecond, "2 seconds"},
		{90 * time.Second, "1 minute"},
		{59 * time.Minute, "59 minutes"},
		{25 * time.Hour, "1 day"},
		{5*24*time.Hour + 23*time.Hour, "5 days"},
		{23 * time.Hour, "23 hours"},
	} {
		if got := spellDuration(tt.d); got != tt.want {
			t.Errorf("spellDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
