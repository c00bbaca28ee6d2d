package consent_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent"
)

// roundTrips counts what a connection sends while it is on: each statement
// or batch is one round trip.
type roundTrips struct {
	mu   sync.Mutex
	on   bool
	sent []string
}

func (r *roundTrips) add(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The signing keys are read again as their caches age, whatever the
	// request.
	if r.on && !strings.Contains(what, "from signing_keys") {
		r.sent = append(r.sent, what)
	}
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.add(fmt.Sprintf("a batch of %d statements", d.Batch.Len()))
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// count returns the round trips fn makes.
func (r *roundTrips) count(fn func()) []string {
	r.mu.Lock()
	r.on, r.sent = true, nil
	r.mu.Unlock()
	fn()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.sent
}

// TestADecisionsRoundTrips pins what a decision and a withdrawal cost once
// the connection has its statements prepared and the caches are warm: the
// lock, the flow's incidents and its latest receipt share one round trip,
// and the definition version is read once.
func TestADecisionsRoundTrips(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 1 // one connection, whose prepared statements the first round warms
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := setupOn(t, pool, time.Hour)
	ctx := context.Background()
	for round := range 2 {
		// A decision: the link's lookup, begin, the lock (one batch), the
		// text, the proof, the state, the consent task, the receipt, the
		// event's number, its delivery task, the event (one statement here)
		// and commit. A withdrawal has no consent task; the organization's
		// has no link lookup and no proof, and reads the link it answers with.
		for _, tt := range []struct {
			name             string
			run              func(flowID, token string) error
			decide, withdraw int
		}{
			{"by the person", func(_, token string) error { _, err := e.journey.Withdraw(ctx, token, me); return err }, 12, 11},
			{"by the organization", func(flowID, _ string) error {
				_, err := e.withdrawals.Withdraw(ctx, e.caller, flowID, etag.Any)
				return err
			}, 12, 10},
		} {
			c, token := e.create(t, "https://bank.example/done")
			decided := trips.count(func() {
				if _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true}); err != nil {
					t.Fatal(err)
				}
			})
			withdrawn := trips.count(func() {
				if err := tt.run(c.FlowID, token); err != nil {
					t.Fatal(err)
				}
			})
			if round == 0 {
				continue // prepares the statements and fills the caches
			}
			if len(decided) != tt.decide {
				t.Errorf("a decision took %d round trips, want %d:\n%s", len(decided), tt.decide, strings.Join(decided, "\n"))
			}
			if len(withdrawn) != tt.withdraw {
				t.Errorf("a withdrawal %s took %d round trips, want %d:\n%s", tt.name, len(withdrawn), tt.withdraw, strings.Join(withdrawn, "\n"))
			}
		}
	}
}
