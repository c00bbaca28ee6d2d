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

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
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
// and the definition version, kept once read, is not read again.
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
		// proof, the state, the consent task, the receipt, the
		// event's number, its delivery task, the event (one statement here)
		// and commit. A withdrawal has no consent task; the organization's
		// has no link lookup and no proof, and reads the link it answers with.
		for _, tt := range []struct {
			name             string
			run              func(flowID, token string) error
			decide, withdraw int
		}{
			{"by the person", func(_, token string) error { _, err := e.journey.Withdraw(ctx, token, me); return err }, 11, 10},
			{"by the organization", func(flowID, _ string) error {
				_, err := e.withdrawals.Withdraw(ctx, e.caller, flowID, etag.Any)
				return err
			}, 11, 9},
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

// TestThePersonsPageRoundTrips pins what the person's own page costs once
// the statements are prepared and the texts kept: finding the person's
// flows, then one round trip for the uses, the link of the open request,
// the receipts and the audit entry of the view, which commits with it.
func TestThePersonsPageRoundTrips(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := setupOn(t, pool, time.Hour)
	ctx := context.Background()
	accepted, token := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.flows.RecordUse(ctx, e.caller, accepted.FlowID, flows.NewUse{Action: "fetched income 2025"}, nil); err != nil {
		t.Fatal(err)
	}
	open, _ := e.create(t, "https://bank.example/done")
	for round := range 2 {
		var mine []consent.MyConsent
		sent := trips.count(func() {
			if mine, err = e.journey.Mine(ctx, me, nil); err != nil {
				t.Fatal(err)
			}
		})
		if len(mine) != 2 || mine[0].FlowID != open.FlowID || mine[0].ConsentURL == "" ||
			mine[1].FlowID != accepted.FlowID || len(mine[1].Receipts) != 1 || !has(mine[1].History, consent.HappenedUsed) {
			t.Fatalf("the page: %+v", mine)
		}
		if round == 1 && (len(sent) != 2 || sent[1] != "a batch of 4 statements") {
			t.Errorf("the page took %d round trips, want the flows' lookup and a batch of 4:\n%s", len(sent), strings.Join(sent, "\n"))
		}
	}
	var viewed []string
	rows, err := pool.Query(ctx, `select reference_id from test_audit where flow_id = 'person_page.viewed' order by id`)
	if err == nil {
		viewed, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	want := open.ReferenceID + "," + accepted.ReferenceID
	if err != nil || len(viewed) != 2 || viewed[0] != want || viewed[1] != want {
		t.Errorf("the views audited: %q, %v; want two of %q", viewed, err, want)
	}
}
