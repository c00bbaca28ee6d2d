package flows_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/syncbuf"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/modules/webhooks"
)

// bundle is what setup gives a test: the flows module, its task reports and
// the real consent requests on a fresh database.
type bundle struct {
	pool    *pgxpool.Pool
	sealer  *pii.Sealer
	flows   *flows.Manager
	reports *taskreports.Reporter
	logs    *syncbuf.Buffer
	caller  flows.Caller // of organization org-a
}

// setup returns the module on a fresh database; mutate changes its
// configuration first.
func setup(t *testing.T, mutate ...func(*flows.Config)) *bundle {
	t.Helper()
	return setupOn(t, dbtest.NewURL(t), mutate...)
}

// setupOn returns the module on the fresh database at url.
func setupOn(t *testing.T, url string, mutate ...func(*flows.Config)) *bundle {
	t.Helper()
	pool := open(t, url)
	if _, err := pool.Exec(context.Background(), `create table test_events (id bigserial primary key, kind text not null,
		flow_id text not null, task_id text not null default '', status text not null default '',
		flow_status text not null default '', version int not null default 0, url text not null default '')`); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	sealer, err := pii.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return instance(pool, sealer, mutate...)
}

// instance builds a bundle on pool, as another flowd instance on the same
// database would be when it shares sealer's key.
func instance(pool *pgxpool.Pool, sealer *pii.Sealer, mutate ...func(*flows.Config)) *bundle {
	cfg := flows.Config{}
	for _, m := range mutate {
		m(&cfg)
	}
	logs := &syncbuf.Buffer{}
	definitions := consent.NewDefinitions(pool, orgs{})
	m := flows.New(pool, sealer, consent.NewRequests(pool, sealer, "https://flowd.example"),
		definitions, orgs{}, tableEvents{},
		slog.New(slog.NewJSONHandler(logs, nil)), prometheus.NewRegistry(), cfg)
	return &bundle{pool: pool, sealer: sealer, flows: m, reports: taskreports.New(pool), logs: logs,
		caller: flows.Caller{OrganizationID: "org-a", ClientID: "client-a"}}
}

// open returns a pool of its own on the database at url, closed at cleanup.
func open(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := database.Open(context.Background(), url, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newFlow is a valid create request with a webhook.
func newFlow(nationalID string) flows.NewFlow {
	return flows.NewFlow{NationalID: nationalID, LastName: "Nordmann", RedirectURL: "https://bank.example/done",
		WebhookURL: "https://hooks.example/flowd"}
}

// create makes a flow of the bundle's caller.
func (b *bundle) create(t *testing.T, in flows.NewFlow) flows.Created {
	t.Helper()
	c, err := b.flows.Create(context.Background(), b.caller, in)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get returns a flow of the bundle's caller.
func (b *bundle) get(t *testing.T, id string) flows.Flow {
	t.Helper()
	f, err := b.flows.Get(context.Background(), b.caller, id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// inTx runs fn in a transaction of its own.
func (b *bundle) inTx(fn func(tx pgx.Tx) error) error {
	return database.WithTx(context.Background(), b.pool, fn)
}

// eventsOf returns the flow's committed events as kind:version, in order.
func (b *bundle) eventsOf(t *testing.T, flowID string) string {
	t.Helper()
	var s string
	if err := b.pool.QueryRow(context.Background(), `select coalesce(string_agg(kind || ':' || version, ',' order by id), '')
		from test_events where flow_id = $1`, flowID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// count returns the result of a count query.
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// tableEvents writes every event into the table test_events through the
// transaction it is given, so that a test sees exactly the events of
// committed changes; a cancel of pending events is a row of kind
// cancel-pending.
type tableEvents struct{}

func (tableEvents) PublishTx(ctx context.Context, tx database.Tx, ev webhooks.Event) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, task_id, status, flow_status, version, url)
		values ($1, $2, $3, $4, $5, $6, $7)`, string(ev.Type), ev.FlowID, ev.TaskID, ev.Status, ev.FlowStatus, ev.Version, ev.URL)
	return err
}

func (tableEvents) CancelPendingTx(ctx context.Context, tx database.Tx, _, flowID string) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('cancel-pending', $1)`, flowID)
	return err
}

// orgs gives every organization the reference prefix of its name's end.
type orgs struct{}

func (orgs) OrganizationName(_ context.Context, id string) (string, error) { return "Bank " + id, nil }

func (orgs) FlowSettings(_ context.Context, organizationID string) (flows.OrganizationSettings, error) {
	return flows.OrganizationSettings{ReferencePrefix: strings.ToUpper(organizationID[len(organizationID)-1:])}, nil
}

// receipt is a receipt as the consent module hands one over: flows keeps
// it as the flow's attachment, whatever it says.
func receipt() flows.SignedReceipt {
	id := uuid.Must(uuid.NewV7()).String()
	return flows.SignedReceipt{ID: id, JWS: "eyJhbGciOiJFUzI1NiJ9." + id + ".c2lnbmVk"}
}

// decideTx records the decision on the organization's flow as the consent
// module does, in tx: locked, then recorded with its receipt.
func (b *bundle) decideTx(ctx context.Context, tx pgx.Tx, organizationID, flowID string, accept bool, evidence flows.Evidence) (flows.Flow, error) {
	locked, err := b.flows.LockTx(ctx, tx, organizationID, flowID, etag.Any)
	if err != nil {
		return flows.Flow{}, err
	}
	return b.flows.RecordDecisionTx(ctx, tx, flows.Decision{OrganizationID: locked.Flow.OrganizationID, FlowID: locked.Flow.ID,
		Accepted: accept, At: time.Now(), Evidence: evidence}, receipt())
}

// withdraw withdraws the acceptance of the caller's flow as the consent
// module does for the organization, in a transaction of its own.
func (b *bundle) withdraw(ctx context.Context, flowID string) (flows.Flow, error) {
	var f flows.Flow
	err := b.inTx(func(tx pgx.Tx) error {
		locked, err := b.flows.LockTx(ctx, tx, b.caller.OrganizationID, flowID, etag.Any)
		if err != nil {
			return err
		}
		f, err = b.flows.RecordWithdrawalTx(ctx, tx, flows.Withdrawal{OrganizationID: locked.Flow.OrganizationID, FlowID: locked.Flow.ID,
			By: flows.ByOrganization, At: time.Now()}, receipt())
		return err
	})
	return f, err
}
