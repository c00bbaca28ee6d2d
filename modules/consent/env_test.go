package consent_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/syncbuf"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/webhooks"
)

// tableEvents is a webhooks.Publisher that writes every event into the
// table test_events through the transaction it is given, so that a test
// sees exactly the events of committed changes.
type tableEvents struct{}

func (tableEvents) PublishTx(ctx context.Context, tx database.Tx, ev webhooks.Event) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, status, flow_status, version) values ($1, $2, $3, $4, $5)`,
		string(ev.Type), ev.FlowID, ev.Status, ev.FlowStatus, ev.Version)
	return err
}

func (tableEvents) CancelPendingTx(context.Context, database.Tx, string, string) error { return nil }

// substantial is the acr of a sign-in at the substantial level, which the
// default definition's level (low) is met by.
var substantial = assurance.DefaultACRMap[assurance.Substantial]

type orgs struct{}

func (orgs) FlowSettings(context.Context, string) (flows.OrganizationSettings, error) {
	return flows.OrganizationSettings{ReferencePrefix: "ACME"}, nil
}

func (orgs) OrganizationName(_ context.Context, id string) (string, error) { return "Acme Bank", nil }

// tableAudit writes every recorded identity mismatch into the table
// test_audit through the transaction it is given, so that a test sees
// exactly the records that committed.
type tableAudit struct{}

func (tableAudit) RecordIdentityMismatchTx(ctx context.Context, tx database.Tx, organizationID, flowID, referenceID string) error {
	_, err := tx.Exec(ctx, `insert into test_audit (organization_id, flow_id, reference_id) values ($1, $2, $3)`,
		organizationID, flowID, referenceID)
	return err
}

// RecordPersonPageTx writes the action, with the references joined, into
// test_audit.
func (tableAudit) RecordPersonPageTx(ctx context.Context, tx database.Tx, organizationID, action string, referenceIDs []string) error {
	_, err := tx.Exec(ctx, `insert into test_audit (organization_id, flow_id, reference_id) values ($1, $2, $3)`,
		organizationID, action, strings.Join(referenceIDs, ","))
	return err
}

// QueuePersonPage writes each record as RecordPersonPageTx does, in one
// statement, however recently it was written (the audit log's own tests
// hold its coalescing).
func (tableAudit) QueuePersonPage(b *database.Batch, action string, records []consent.PersonPageRecord, _ time.Duration) error {
	var orgs, refs []string
	for _, r := range records {
		orgs, refs = append(orgs, r.OrganizationID), append(refs, strings.Join(r.ReferenceIDs, ","))
	}
	b.QueueExec(`insert into test_audit (organization_id, flow_id, reference_id) select o, $2, r from unnest($1::text[], $3::text[]) as x(o, r)`,
		[]any{orgs, action, refs})
	return nil
}

// journeyEnv is the real journey on the real flows module and a fresh database.
type journeyEnv struct {
	pool        *pgxpool.Pool
	flows       *flows.Manager
	journey     *consent.JourneyService
	withdrawals *consent.WithdrawalService
	receipts    *receipts.Service
	defs        *consent.DefinitionStore
	logs        *syncbuf.Buffer
	caller      flows.Caller
}

// setup returns the journey on a fresh database whose consent requests
// expire after ttl.
func setup(t *testing.T, ttl time.Duration) *journeyEnv {
	t.Helper()
	return setupOn(t, dbtest.New(t), ttl)
}

// setupOn returns the journey on pool, a fresh database.
func setupOn(t *testing.T, pool *pgxpool.Pool, ttl time.Duration) *journeyEnv {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `create table test_events (id bigserial primary key, kind text not null,
		flow_id text not null, status text not null, flow_status text not null, version int not null);
		create table test_audit (id bigserial primary key, organization_id text not null, flow_id text not null,
		reference_id text not null)`); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	sealer, err := pii.New(key)
	if err != nil {
		t.Fatal(err)
	}
	requests := consent.NewRequests(pool, sealer, "https://flowd.example")
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	defs := consent.NewDefinitions(pool, orgs{})
	// Receipts are signed with the identity module's receipt key, made
	// before the first decision as flowd serve makes it at start.
	signing, err := keys.New(pool, changes.NewFeed(pool, nil), keys.Config{KeyEncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	receiptService := receipts.New(pool, signing, orgs{}, "https://flowd.example")
	m := flows.New(pool, sealer, requests, defs, orgs{}, tableEvents{}, log, prometheus.NewRegistry(),
		flows.Config{ConsentTTL: ttl, PersonIndex: nationalid.NewBlindIndex(key, nationalid.Format{}),
			// Every acceptance is within the notice: mine_test asks for it.
			ExpiringNotice: 100 * 365 * 24 * time.Hour})
	j := consent.NewJourney(pool, requests, m, defs, receiptService, orgs{}, tableAudit{}, assurance.DefaultACRMap, log)
	return &journeyEnv{pool: pool, flows: m, journey: j, withdrawals: consent.NewWithdrawals(pool, requests, m, defs, receiptService),
		receipts: receiptService, defs: defs, logs: logs, caller: flows.Caller{OrganizationID: "org-1", ClientID: "client-1"}}
}

// audited returns the committed audit records of identity mismatches on a
// flow, each as its organization and reference.
func (e *journeyEnv) audited(t *testing.T, flowID string) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `select organization_id || ' ' || reference_id from test_audit
		where flow_id = $1 order by id`, flowID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// create makes a flow for national id 12345678901 and returns it with its link token.
func (e *journeyEnv) create(t *testing.T, redirectURL string) (flows.Created, string) {
	t.Helper()
	return e.createOn(t, redirectURL, "", 0)
}

// createOn is create for version n of definition id ("" and 0: the defaults).
func (e *journeyEnv) createOn(t *testing.T, redirectURL, id string, n int) (flows.Created, string) {
	t.Helper()
	c, err := e.flows.Create(context.Background(), e.caller, flows.NewFlow{NationalID: "12345678901", LastName: "Nordmann",
		RedirectURL: redirectURL, WebhookURL: "https://hooks.example/flowd", ReferenceName: "Mortgage application",
		FlowDefinitionID: id, FlowDefinitionVersion: n})
	if err != nil {
		t.Fatal(err)
	}
	token, ok := strings.CutPrefix(c.ConsentURL, "https://flowd.example/consent/")
	if !ok {
		t.Fatalf("consent link %q", c.ConsentURL)
	}
	return c, token
}

func (e *journeyEnv) get(t *testing.T, id string) flows.Flow {
	t.Helper()
	f, err := e.flows.Get(context.Background(), e.caller, id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// events returns the kinds of the flow's committed events, in order.
func (e *journeyEnv) events(t *testing.T, flowID string) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `select kind from test_events where flow_id = $1 order by id`, flowID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	return kinds
}
