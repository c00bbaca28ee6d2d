package webhooks_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks"
)

// TestDeliverySignedAndShaped: one event arrives once, signed, with exactly
// the contract's body, and its task succeeds.
func TestDeliverySignedAndShaped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, b.secret)
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	ev := b.event(webhooks.FlowAccepted, "flow-1", rcv.URL())
	ev.OccurredAt = at
	publish(t, b.pool, b.hooks, ev)
	id := eventID(t, b.pool, "flow-1", webhooks.FlowAccepted)
	eventually(t, "task succeeded", func() bool { return b.reporter.has("succeeded org-1/task-flow-1") })

	ds := rcv.Deliveries()
	if len(ds) != 1 {
		t.Fatalf("receiver got %d deliveries, want 1", len(ds))
	}
	d := ds[0]
	if d.ID != id {
		t.Errorf("webhook-id = %q, want the event id %q", d.ID, id)
	}
	if ts, err := strconv.ParseInt(d.Timestamp, 10, 64); err != nil || ts < at.Unix() {
		t.Errorf("webhook-timestamp = %q, want Unix seconds of the attempt", d.Timestamp)
	}
	want := `{"type":"flow.accepted","timestamp":"2026-01-02T03:04:05.678Z","data":{"flowId":"flow-1","referenceId":"REF-flow-1","organizationId":"org-1","status":"Accepted","flowStatus":"completed","version":3,"sequence":3}}`
	if string(d.Body) != want {
		t.Errorf("body\n got %s\nwant %s", d.Body, want)
	}
	if got := eventState(t, b.pool, id); got != "delivered" {
		t.Errorf("event state = %s, want delivered", got)
	}
	attempts, err := b.hooks.Attempts(context.Background(), b.org, "flow-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || attempts[0].StatusCode != 200 || attempts[0].Error != "" || attempts[0].EventID != id || attempts[0].EventType != webhooks.FlowAccepted {
		t.Errorf("attempts = %+v, want one 200", attempts)
	}
	if other, _ := b.hooks.Attempts(context.Background(), "org-2", "flow-1"); len(other) != 0 {
		t.Errorf("another organization sees %d attempts", len(other))
	}
}

// TestRetryThenSuccess: a receiver that fails three times and then accepts
// gets exactly one accepted delivery, always with the same webhook-id; the
// incident opens at the third failure and the success resolves it.
func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(_ delivery, nth int) int {
		if nth <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowCreated)
	eventually(t, "task succeeded", func() bool { return b.reporter.has("succeeded org-1/task-flow-1") })

	if n := rcv.count(id, 200, 300); n != 1 {
		t.Errorf("accepted deliveries = %d, want 1", n)
	}
	ds := rcv.Deliveries()
	if len(ds) != 4 {
		t.Errorf("deliveries = %d, want 4", len(ds))
	}
	for _, d := range ds {
		if d.ID != id {
			t.Errorf("a retry carries webhook-id %q, want %q", d.ID, id)
		}
	}
	calls := b.reporter.Calls()
	wantFailing := "failing org-1/task-flow-1: Webhook delivery to " + strings.TrimPrefix(rcv.srv.URL, "http://") + " failed: HTTP 503 Service Unavailable"
	if len(calls) != 2 || calls[0] != wantFailing || calls[1] != "succeeded org-1/task-flow-1" {
		t.Errorf("reporter calls = %q, want the incident opened at the third failure (%q) then resolved", calls, wantFailing)
	}
	for _, c := range calls {
		if strings.Contains(c, "query-secret") || strings.Contains(c, "/hooks") {
			t.Errorf("a message reveals the URL's path or query: %q", c)
		}
	}
	attempts, err := b.hooks.Attempts(context.Background(), b.org, "flow-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 4 {
		t.Fatalf("attempts = %d, want 4", len(attempts))
	}
	if attempts[0].StatusCode != 200 || attempts[0].Error != "" {
		t.Errorf("newest attempt = %+v, want the success", attempts[0])
	}
	for _, a := range attempts[1:] {
		if a.StatusCode != 503 || a.Error != "HTTP 503 Service Unavailable" || a.At.IsZero() {
			t.Errorf("failed attempt = %+v", a)
		}
	}
}

// TestGoneStops: 410 Gone ends the deliveries of the event for good and fails its task.
func TestGoneStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(delivery, int) int { return http.StatusGone }
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowOpened, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowOpened)
	eventually(t, "task failed", func() bool { return b.reporter.has("failed org-1/task-flow-1") })
	eventually(t, "job finalized", func() bool { return jobState(t, b.pool, id) == "cancelled" })

	if n := len(rcv.Deliveries()); n != 1 {
		t.Errorf("deliveries = %d, want 1", n)
	}
	if got := eventState(t, b.pool, id); got != "failed" {
		t.Errorf("event state = %s, want failed", got)
	}
	calls := b.reporter.Calls()
	if len(calls) != 1 || !strings.Contains(calls[0], "410") {
		t.Errorf("reporter calls = %q, want one failure naming 410", calls)
	}

	// Staff retry from the console: it is sent again at once, and succeeds.
	rcv.respond = nil
	if err := b.hooks.RetryTask(context.Background(), "org-2", "task-flow-1"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("RetryTask of another organization = %v, want ErrNotFound", err)
	}
	if err := b.hooks.RetryTask(context.Background(), b.org, "task-unknown"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("RetryTask of an unknown task = %v, want ErrNotFound", err)
	}
	if err := b.hooks.RetryTask(context.Background(), b.org, "task-flow-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "retried task succeeded", func() bool { return b.reporter.has("succeeded org-1/task-flow-1") })
	if n := rcv.count(id, 200, 300); n != 1 {
		t.Errorf("accepted deliveries after retry = %d, want 1", n)
	}
}

// TestAbortHeaderStops: a failure answered with webhook-delivery: abort ends
// the event's retries as 410 does; without the header the same status is
// retried.
func TestAbortHeaderStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(delivery, int) int { return http.StatusUnprocessableEntity }
	rcv.header = http.Header{"Webhook-Delivery": {"abort"}}
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowOpened, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowOpened)
	eventually(t, "task failed", func() bool { return b.reporter.has("failed org-1/task-flow-1") })
	if n := len(rcv.Deliveries()); n != 1 {
		t.Errorf("deliveries = %d, want 1", n)
	}
	if got := eventState(t, b.pool, id); got != "failed" {
		t.Errorf("event state = %s, want failed", got)
	}
	if calls := b.reporter.Calls(); len(calls) != 1 || !strings.Contains(calls[0], "webhook-delivery: abort") {
		t.Errorf("reporter calls = %q, want one failure naming the header", calls)
	}

	again := newReceiver(t, b.secret)
	again.respond = func(_ delivery, nth int) int {
		if nth == 1 {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowOpened, "flow-2", again.URL()))
	eventually(t, "the retry without the header", func() bool { return b.reporter.has("succeeded org-1/task-flow-2") })
}

// TestExhaustion: a receiver that always fails gets every attempt of the
// schedule and then no more; the task fails for good.
func TestExhaustion(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) { o.Schedule = testSchedule[:2]; o.IncidentAfter = 1 })
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(delivery, int) int { return http.StatusInternalServerError }
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowRejected, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowRejected)
	eventually(t, "task failed", func() bool { return b.reporter.has("failed org-1/task-flow-1") })
	eventually(t, "job finalized", func() bool { return jobState(t, b.pool, id) == "cancelled" })
	if n := len(rcv.Deliveries()); n != 3 {
		t.Errorf("deliveries = %d, want 3 (the first and two retries)", n)
	}
	calls := b.reporter.Calls()
	if len(calls) != 3 || !strings.HasPrefix(calls[0], "failing ") || !strings.HasPrefix(calls[1], "failing ") || !strings.HasPrefix(calls[2], "failed ") {
		t.Errorf("reporter calls = %q, want failing, failing, failed", calls)
	}
}

// TestRotation: after a rotation both secrets sign, each signature verifies
// with its own secret, and the new secret is the current one.
func TestRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.secret
	s, err := b.hooks.RotateSecret(context.Background(), b.org)
	if err != nil {
		t.Fatal(err)
	}
	if s.Value == old || !strings.HasPrefix(s.Value, "whsec_") {
		t.Fatalf("rotated secret %q", s.Value)
	}
	cur, err := b.hooks.CurrentSecret(context.Background(), b.org)
	if err != nil || cur.Value != s.Value {
		t.Fatalf("CurrentSecret = %q, %v; want the new one", cur.Value, err)
	}
	rcv := newReceiver(t, s.Value, old)
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCancelled, "flow-1", rcv.URL()))
	eventually(t, "task succeeded", func() bool { return b.reporter.has("succeeded org-1/task-flow-1") })

	d := rcv.Deliveries()[0]
	sigs := strings.Fields(d.Signature)
	if len(sigs) != 2 {
		t.Fatalf("webhook-signature %q, want two signatures", d.Signature)
	}
	for i, secret := range []string{s.Value, old} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", d.ID)
		h.Set("webhook-timestamp", d.Timestamp)
		h.Set("webhook-signature", sigs[i])
		if err := wh.Verify(d.Body, h); err != nil {
			t.Errorf("signature %d does not verify with its secret: %v", i, err)
		}
		other := sigs[1-i]
		h.Set("webhook-signature", other)
		if err := wh.Verify(d.Body, h); err == nil {
			t.Errorf("signature %d verifies with the other secret", 1-i)
		}
	}

	if _, err := b.hooks.RotateSecret(context.Background(), "org-unknown"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("RotateSecret of an unknown organization = %v, want ErrNotFound", err)
	}
	if _, err := b.hooks.CurrentSecret(context.Background(), "org-unknown"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("CurrentSecret of an unknown organization = %v, want ErrNotFound", err)
	}
}

// TestCreateSecretIdempotent: a second CreateSecretTx keeps the first secret.
func TestCreateSecretIdempotent(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	err := database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		s, err := b.hooks.CreateSecretTx(context.Background(), tx, b.org)
		if err == nil && s.Value != b.secret {
			t.Errorf("second CreateSecretTx = %q, want the first %q", s.Value, b.secret)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSSRFGuard: without AllowPrivate, neither a non-public address nor a DNS
// name resolving to loopback is connected to, and the attempt names the
// address refused, not the URL.
func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) { o.AllowPrivate = false; o.Schedule = []time.Duration{time.Hour} })
	rcv := newReceiver(t, b.secret)
	port := rcv.srv.Listener.Addr().String()
	port = port[strings.LastIndex(port, ":")+1:]
	tests := []struct {
		flow, url, address string
	}{
		{"flow-localhost", "http://localhost:" + port + "/hooks?token=query-secret", ":" + port},
		{"flow-loopback", rcv.URL(), "127.0.0.1:" + port},
		{"flow-private", "http://10.255.255.1:" + port + "/hooks", "10.255.255.1:" + port},
		{"flow-metadata", "http://169.254.169.254/latest/meta-data", "169.254.169.254:80"},
		{"flow-mapped", "http://[::ffff:127.0.0.1]:" + port + "/hooks", "127.0.0.1:" + port},
		{"flow-6to4", "https://[2002:7f00:1::1]:" + port + "/hooks", "[2002:7f00:1::1]:" + port},
	}
	for _, tt := range tests {
		publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, tt.flow, tt.url))
	}
	for _, tt := range tests {
		var attempts []webhooks.Attempt
		eventually(t, "the attempt of "+tt.flow, func() bool {
			var err error
			attempts, err = b.hooks.Attempts(context.Background(), b.org, tt.flow)
			return err == nil && len(attempts) > 0
		})
		a := attempts[0]
		if a.StatusCode != 0 || !strings.Contains(a.Error, "refused to connect to ") || !strings.Contains(a.Error, tt.address+": not a public address") {
			t.Errorf("%s: attempt = %+v, want %s refused as not public", tt.flow, a, tt.address)
		}
		if strings.Contains(a.Error, "query-secret") || strings.Contains(a.Error, "/hooks") {
			t.Errorf("%s: the error reveals the URL: %q", tt.flow, a.Error)
		}
	}
	if n := rcv.Arrived(); n != 0 {
		t.Errorf("the receiver on loopback got %d requests", n)
	}
}

// TestAJobQueuedBeforeOrganizationsDelivers: a delivery job that names no
// organization (queued by an instance older than migration 022) still
// delivers its event, and its task is reported under its organization.
func TestAJobQueuedBeforeOrganizationsDelivers(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	rcv := newReceiver(t, b.secret)
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowCreated)
	tag, err := b.pool.Exec(context.Background(), `update river_job set args = args - 'organization_id'
		where kind = 'flowd.webhook_delivery' and args->>'event_id' = $1 and args->>'organization_id' = $2`, id, b.org)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("the job of %s names its organization? %v %v", id, tag, err)
	}
	b.start(t)
	eventually(t, "task succeeded", func() bool { return b.reporter.has("succeeded org-1/task-flow-1") })
	if s := eventState(t, b.pool, id); s != "delivered" || rcv.Arrived() != 1 {
		t.Fatalf("delivery %s, %d arrived", s, rcv.Arrived())
	}
	if attempts, err := b.hooks.Attempts(context.Background(), b.org, "flow-1"); err != nil || len(attempts) != 1 {
		t.Fatalf("attempts %+v, %v", attempts, err)
	}
}

// TestCancelPending: deleting a flow cancels its pending deliveries, all but
// the flow.deleted event published with the deletion; a flow of the same id
// in another organization cancels none of them.
func TestCancelPending(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	rcv := newReceiver(t, b.secret)
	publish(t, b.pool, b.hooks,
		b.event(webhooks.FlowCreated, "flow-1", rcv.URL()),
		b.event(webhooks.FlowOpened, "flow-1", rcv.URL()),
		b.event(webhooks.FlowCreated, "flow-2", rcv.URL()))
	err := database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		return b.hooks.CancelPendingTx(context.Background(), tx, "org-2", "flow-1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := eventState(t, b.pool, eventID(t, b.pool, "flow-1", webhooks.FlowCreated)); s != "pending" {
		t.Fatalf("another organization's deletion of flow-1 left its event %s", s)
	}
	deleted := b.event(webhooks.FlowDeleted, "flow-1", rcv.URL())
	deleted.TaskID = ""
	err = database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		if err := b.hooks.CancelPendingTx(context.Background(), tx, b.org, "flow-1"); err != nil {
			return err
		}
		return b.hooks.PublishTx(context.Background(), tx, deleted)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []webhooks.EventType{webhooks.FlowCreated, webhooks.FlowOpened} {
		id := eventID(t, b.pool, "flow-1", typ)
		if s := jobState(t, b.pool, id); s != "cancelled" {
			t.Errorf("job of %s: %s, want cancelled", typ, s)
		}
	}
	b.start(t)
	delID := eventID(t, b.pool, "flow-1", webhooks.FlowDeleted)
	f2 := eventID(t, b.pool, "flow-2", webhooks.FlowCreated)
	eventually(t, "flow.deleted and flow-2 delivered", func() bool {
		return eventState(t, b.pool, delID) == "delivered" && eventState(t, b.pool, f2) == "delivered"
	})
	for _, d := range rcv.Deliveries() {
		if d.Payload.Data["flowId"] == "flow-1" && d.Payload.Type != "flow.deleted" {
			t.Errorf("a cancelled %s of flow-1 was delivered", d.Payload.Type)
		}
	}
	for _, c := range b.reporter.Calls() {
		if c != "succeeded org-1/task-flow-2" {
			t.Errorf("reporter call %q; want only flow-2's task (flow.deleted has none)", c)
		}
	}
}

// TestCancelInFlight: deleting a flow interrupts its delivery under way; the
// event is neither retried nor reported.
func TestCancelInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	rcv := newReceiver(t, b.secret)
	t.Cleanup(func() { close(release) })
	rcv.respond = func(delivery, int) int {
		<-release
		return http.StatusOK
	}
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowOpened, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowOpened)
	eventually(t, "the delivery under way", func() bool { return rcv.Arrived() == 1 })
	err := database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		return b.hooks.CancelPendingTx(context.Background(), tx, b.org, "flow-1")
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job cancelled", func() bool { return jobState(t, b.pool, id) == "cancelled" })
	if s := eventState(t, b.pool, id); s != "cancelled" {
		t.Errorf("event state = %s, want cancelled", s)
	}
	if calls := b.reporter.Calls(); len(calls) != 0 {
		t.Errorf("reporter calls = %q, want none", calls)
	}
	if attempts, _ := b.hooks.Attempts(context.Background(), b.org, "flow-1"); len(attempts) != 0 {
		t.Errorf("attempts = %+v, want none for an interrupted delivery", attempts)
	}
}

// TestPublishRollback: an event of a rolled-back transaction leaves nothing.
func TestPublishRollback(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	boom := errors.New("boom")
	err := database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		if err := b.hooks.PublishTx(context.Background(), tx, b.event(webhooks.FlowCreated, "flow-1", "https://example.com/h")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	var events, jobs int
	if err := b.pool.QueryRow(context.Background(), "select (select count(*) from webhook_events), (select count(*) from river_job)").Scan(&events, &jobs); err != nil {
		t.Fatal(err)
	}
	if events != 0 || jobs != 0 {
		t.Errorf("after rollback: %d events, %d jobs; want none", events, jobs)
	}
}

// TestPublishValidates: invalid events are refused, and an event without URL
// is kept with no delivery.
func TestPublishValidates(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	bad := []webhooks.Event{
		{Type: "flow.exploded", FlowID: "f", OrganizationID: "o", Sequence: 1, URL: "https://example.com"},
		{Type: webhooks.FlowCreated, OrganizationID: "o", Sequence: 1, URL: "https://example.com"},
		{Type: webhooks.FlowCreated, FlowID: "f", Sequence: 1, URL: "https://example.com"},
		{Type: webhooks.FlowCreated, FlowID: "f", OrganizationID: "o", Sequence: 1, URL: "ftp://example.com"},
		{Type: webhooks.FlowCreated, FlowID: "f", OrganizationID: "o", Sequence: 1, URL: "/relative"},
		{Type: webhooks.FlowCreated, FlowID: "f", OrganizationID: "o", URL: "https://example.com"},
		{Type: webhooks.EndpointDisabled, FlowID: "f", OrganizationID: "o", Sequence: 1, URL: "https://example.com"},
	}
	for _, ev := range bad {
		err := database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
			return b.hooks.PublishTx(context.Background(), tx, ev)
		})
		if !errors.Is(err, webhooks.ErrInvalidEvent) {
			t.Errorf("PublishTx(%+v) = %v, want ErrInvalidEvent", ev, err)
		}
	}
	publish(t, b.pool, b.hooks, webhooks.Event{Type: webhooks.FlowCreated, FlowID: "f", OrganizationID: "o", Sequence: 1})
	var deliveries, events int
	if err := b.pool.QueryRow(context.Background(), "select (select count(*) from webhook_events), (select count(*) from events)").
		Scan(&deliveries, &events); err != nil || deliveries != 0 || events != 1 {
		t.Errorf("deliveries = %d, events = %d, %v; want the event and no delivery", deliveries, events, err)
	}
}

// TestSecretsEncryptedAtRest: the database holds no signing secret in the
// clear, and a module without the key cannot use a sealed one.
func TestSecretsEncryptedAtRest(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	var stored string
	if err := b.pool.QueryRow(context.Background(), "select secret from webhook_secrets where organization_id = $1", b.org).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, "whsec_") || strings.Contains(stored, strings.TrimPrefix(b.secret, "whsec_")) {
		t.Errorf("stored secret %q is in the clear", stored)
	}
	keyless, err := webhooks.New(b.pool, b.reporter, webhooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keyless.CurrentSecret(context.Background(), b.org); err == nil {
		t.Error("a module without the key opened a sealed secret")
	}
	// Without a key secrets are kept as they are, and a keyed module reads them.
	err = database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		_, err := keyless.CreateSecretTx(context.Background(), tx, "org-plain")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.hooks.CurrentSecret(context.Background(), "org-plain")
	if err != nil || !strings.HasPrefix(s.Value, "whsec_") {
		t.Errorf("plain secret read back as %q, %v", s.Value, err)
	}
}

// TestRetryTaskAfterJobPruned: a retry still works once River has pruned the
// event's finished job; a new job delivers it.
func TestRetryTaskAfterJobPruned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(_ delivery, nth int) int {
		if nth == 1 {
			return http.StatusGone
		}
		return http.StatusNoContent
	}
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowCreated)
	eventually(t, "task failed", func() bool { return b.reporter.has("failed org-1/task-flow-1") })
	eventually(t, "job finalized", func() bool { return jobState(t, b.pool, id) == "cancelled" })
	if _, err := b.pool.Exec(context.Background(), "delete from river_job where id = (select job_id from webhook_events where id = $1)", id); err != nil {
		t.Fatal(err)
	}
	if err := b.hooks.RetryTask(context.Background(), b.org, "task-flow-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "task succeeded", func() bool { return b.reporter.has("succeeded org-1/task-flow-1") })
	if n := rcv.count(id, 200, 300); n != 1 {
		t.Errorf("accepted deliveries = %d, want 1", n)
	}
}
