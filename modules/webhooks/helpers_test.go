package webhooks_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
)

// testSchedule retries at once, so that tests of retries stay fast.
var testSchedule = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}

// testKEK is the key encryption key flowdtest gives flowd, decoded.
var testKEK, _ = base64.StdEncoding.DecodeString(flowdtest.TestKeyEncryptionKey)

// bundle is what setup gives a test.
type bundle struct {
	pool     *pgxpool.Pool
	hooks    *webhooks.Module
	reporter *recorder
	org      string
	secret   string
}

// setup returns a running module on a fresh database, with a short retry
// schedule and an organization that has a secret. Change opts before it runs
// with the mutator.
func setup(t *testing.T, mutate ...func(*webhooks.Options)) *bundle {
	t.Helper()
	b := newBundle(t, dbtest.New(t), mutate...)
	b.start(t)
	return b
}

// newBundle builds the module on pool without running its workers.
func newBundle(t *testing.T, pool *pgxpool.Pool, mutate ...func(*webhooks.Options)) *bundle {
	t.Helper()
	opts := webhooks.Options{
		Timeout: 5 * time.Second, AllowPrivate: true, Schedule: testSchedule, PollInterval: 100 * time.Millisecond,
		KeyEncryptionKey: testKEK,
		// A busy test machine makes a local receiver look slow to the
		// gate; a short first hold keeps its backoff within seconds.
		HoldBackoff: 50 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&opts)
	}
	rec := &recorder{}
	hooks, err := webhooks.New(pool, rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, hooks: hooks, reporter: rec, org: "org-1"}
	err = database.WithTx(context.Background(), pool, func(tx database.Tx) error {
		s, err := hooks.CreateSecretTx(context.Background(), tx, b.org)
		b.secret = s.Value
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// start runs the module's workers until the test ends; at cleanup Run must
// return nil once its context ends.
func (b *bundle) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.hooks.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Until(testwait.Deadline(t))):
			t.Error("Run did not return after the end of its context")
		}
	})
}

// event returns an event of the bundle's organization for flow, to url.
func (b *bundle) event(typ webhooks.EventType, flow, url string) webhooks.Event {
	return webhooks.Event{
		Type: typ, FlowID: flow, ReferenceID: "REF-" + flow, OrganizationID: b.org,
		Status: "Accepted", FlowStatus: "completed", Version: 3, Sequence: 3, URL: url, TaskID: "task-" + flow,
	}
}

// publish stores events in one transaction.
func publish(t *testing.T, pool *pgxpool.Pool, p webhooks.Publisher, evs ...webhooks.Event) {
	t.Helper()
	err := database.WithTx(context.Background(), pool, func(tx database.Tx) error {
		for _, ev := range evs {
			if err := p.PublishTx(context.Background(), tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eventID returns the id of the flow's event of type typ: the webhook-id of
// its deliveries, and the id of the delivery to the flow's own URL.
func eventID(t *testing.T, pool *pgxpool.Pool, flow string, typ webhooks.EventType) string {
	t.Helper()
	var id string
	err := pool.QueryRow(context.Background(), "select id::text from events where flow_id = $1 and type = $2", flow, string(typ)).Scan(&id)
	if err != nil {
		t.Fatalf("event of %s %s: %v", flow, typ, err)
	}
	return id
}

// eventState returns the state of an event.
func eventState(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), "select state from webhook_events where id = $1", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// jobState returns the state of the River job of an event.
func jobState(t *testing.T, pool *pgxpool.Pool, eventID string) string {
	t.Helper()
	// Two statements: on Citus River's table stays on the coordinator,
	// apart from the distributed deliveries.
	var job int64
	var s string
	if err := pool.QueryRow(context.Background(), "select job_id from webhook_events where id = $1", eventID).Scan(&job); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(context.Background(), "select state::text from river_job where id = $1", job).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// eventually waits until the test's deadline for cond; it never asserts how long it took.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is a TaskReporter that remembers every call.
type recorder struct {
	mu    sync.Mutex
	calls []string // "succeeded org/task", "failing org/task: message", "failed org/task: message"
}

func (r *recorder) add(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
	return nil
}

func (r *recorder) TaskSucceeded(_ context.Context, organizationID, taskID string) error {
	return r.add("succeeded " + organizationID + "/" + taskID)
}

func (r *recorder) TaskFailing(_ context.Context, organizationID, taskID, message string) error {
	return r.add("failing " + organizationID + "/" + taskID + ": " + message)
}

func (r *recorder) TaskFailed(_ context.Context, organizationID, taskID, message string) error {
	return r.add("failed " + organizationID + "/" + taskID + ": " + message)
}

func (r *recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// has reports whether a call starts with prefix.
func (r *recorder) has(prefix string) bool {
	for _, c := range r.Calls() {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// delivery is one request a receiver got.
type delivery struct {
	ID        string
	Timestamp string
	Signature string
	Body      []byte
	Payload   payload
	Status    int
}

type payload struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// receiver is a webhook endpoint on loopback. It verifies every delivery
// with the Standard Webhooks Go library against the secrets it is given, and
// answers what respond says (200 by default).
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	secrets []string
	respond func(d delivery, nth int) int // nth: 1 for the first delivery of this webhook-id
	header  http.Header                   // added to every answer

	mu         sync.Mutex
	arrived    []string // webhook-ids, as requests arrive (before respond)
	deliveries []delivery
}

func newReceiver(t *testing.T, secrets ...string) *receiver {
	r := &receiver{t: t, secrets: secrets}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) URL() string { return r.srv.URL + "/hooks?token=query-secret" }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	d := delivery{
		ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
		Signature: req.Header.Get("webhook-signature"), Body: body,
	}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		r.t.Errorf("delivery %s: %s with Content-Type %q", d.ID, req.Method, req.Header.Get("Content-Type"))
	}
	for _, s := range r.secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			r.t.Errorf("secret: %v", err)
			continue
		}
		if err := wh.Verify(body, req.Header); err != nil {
			r.t.Errorf("delivery %s does not verify: %v", d.ID, err)
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d.Payload); err != nil {
		r.t.Errorf("delivery %s: body %s: %v", d.ID, body, err)
	}
	r.mu.Lock()
	r.arrived = append(r.arrived, d.ID)
	nth := 1
	for _, prev := range r.deliveries {
		if prev.ID == d.ID {
			nth++
		}
	}
	r.mu.Unlock()
	d.Status = http.StatusOK
	if r.respond != nil {
		d.Status = r.respond(d, nth)
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(d.Status)
	fmt.Fprint(w, "ok")
}

func (r *receiver) Deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...)
}

// count returns how many deliveries of id were answered with a status in [lo, hi).
func (r *receiver) count(id string, lo, hi int) int {
	n := 0
	for _, d := range r.Deliveries() {
		if d.ID == id && d.Status >= lo && d.Status < hi {
			n++
		}
	}
	return n
}

// Arrived returns how many requests have arrived, answered or not.
func (r *receiver) Arrived() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.arrived)
}

func newPool(t *testing.T) *pgxpool.Pool { return dbtest.New(t) }
