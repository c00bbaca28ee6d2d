package webhooks_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/webhooks"
)

// TestAnEndpointsETagChangesWithEveryChangeOfIt: the endpoint's version,
// which its ETag names, grows with an update, with its health starting and
// ending a failure, and with flowd disabling it: each changes what the API
// shows of it.
func TestAnEndpointsETagChangesWithEveryChangeOfIt(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) {
		o.DisableAfter = time.Hour
		o.Schedule = []time.Duration{10 * time.Millisecond}
	})
	ctx := context.Background()
	rcv, status := failingReceiver(t, b.secret)
	ep := b.createEndpoint(t, rcv, true)
	if ep.Version != 1 || ep.ETag() != `"v1"` {
		t.Fatalf("a new endpoint: version %d, ETag %s", ep.Version, ep.ETag())
	}
	seen := map[string]string{ep.ETag(): "created"}
	current := func() webhooks.Endpoint {
		t.Helper()
		e, err := b.endpoints().Get(ctx, b.org, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	changed := func(what string, e webhooks.Endpoint) {
		t.Helper()
		if earlier, ok := seen[e.ETag()]; ok {
			t.Fatalf("after %s the ETag is %s, as after %s: %+v", what, e.ETag(), earlier, e)
		}
		seen[e.ETag()] = what
	}

	updated, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Description: ptr("Billing")}, etag.Any)
	if err != nil {
		t.Fatal(err)
	}
	changed("an update", updated)

	publish(t, b.pool, b.hooks, b.flowEvent("flow-1"))
	var failing webhooks.Endpoint
	eventually(t, "the endpoint failing", func() bool {
		failing = current()
		return failing.FailingSince != nil
	})
	changed("a failure", failing)
	// Every attempt of the first event recorded before the receiver heals:
	// a failure recorded after the recovery would start a new one.
	first := eventID(t, b.pool, "flow-1", webhooks.FlowCreated)
	eventually(t, "the first event's attempts ended", func() bool {
		_, deliveries, err := b.hooks.Event(ctx, b.org, first)
		return err == nil && len(deliveries) == 1 && deliveries[0].State == "failed"
	})

	status.Store(http.StatusOK)
	publish(t, b.pool, b.hooks, b.flowEvent("flow-2"))
	var healthy webhooks.Endpoint
	eventually(t, "the endpoint healthy again", func() bool {
		healthy = current()
		return healthy.FailingSince == nil
	})
	changed("a success after the failure", healthy)

	// Deliveries that change nothing of the endpoint leave its ETag.
	publish(t, b.pool, b.hooks, b.flowEvent("flow-3"))
	third := eventID(t, b.pool, "flow-3", webhooks.FlowCreated)
	// Recorded, not only received: the health is written with the outcome,
	// and one written after the change below would undo it.
	eventually(t, "the third delivery recorded", func() bool {
		_, deliveries, err := b.hooks.Event(ctx, b.org, third)
		return err == nil && len(deliveries) == 1 && deliveries[0].State == "delivered"
	})
	if got := current(); got.ETag() != healthy.ETag() {
		t.Fatalf("a success of a healthy endpoint changed its ETag from %s to %s", healthy.ETag(), got.ETag())
	}

	// flowd disabling it, made due by a failure two hours old. The next
	// failure finds the endpoint failing already, so only disabling it
	// changes it.
	if _, err := b.pool.Exec(ctx, `update webhook_endpoints set failing_since = now() - interval '2 hours' where id = $1`, ep.ID); err != nil {
		t.Fatal(err)
	}
	status.Store(http.StatusInternalServerError)
	publish(t, b.pool, b.hooks, b.flowEvent("flow-4"))
	var disabled webhooks.Endpoint
	eventually(t, "the endpoint disabled", func() bool {
		disabled = current()
		return !disabled.Enabled
	})
	changed("disabling", disabled)
}

// TestAnEndpointsWritesCheckIfMatch: an update or delete whose If-Match
// names an earlier version changes nothing; one naming the current version,
// or a list holding it, goes through.
func TestAnEndpointsWritesCheckIfMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	eps := b.endpoints()
	ep := b.createEndpoint(t, newReceiver(t), false)
	stale := ep.ETag()
	cond := func(lines ...string) etag.IfMatch {
		t.Helper()
		m, err := etag.ParseIfMatch(lines)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hookRan := false
	hook := func(context.Context, database.Tx, webhooks.EndpointChange) error { hookRan = true; return nil }

	now, err := eps.Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Description: ptr("first")}, cond(stale))
	if err != nil || now.Description != "first" || now.ETag() == stale {
		t.Fatalf("an update naming the current version: %+v, %v", now, err)
	}
	if _, err := eps.Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Description: ptr("second")}, cond(stale), hook); apperr.CodeOf(err) != apperr.PreconditionFailed {
		t.Fatalf("an update naming an earlier version: %v, want precondition-failed", err)
	}
	if _, err := eps.Delete(ctx, b.org, ep.ID, cond(stale)); apperr.CodeOf(err) != apperr.PreconditionFailed {
		t.Fatalf("a delete naming an earlier version: %v, want precondition-failed", err)
	}
	if got, err := eps.Get(ctx, b.org, ep.ID); err != nil || !reflect.DeepEqual(got, now) || hookRan {
		t.Fatalf("refused writes changed the endpoint to %+v (%v) from %+v, or ran the hook (%v)", got, err, now, hookRan)
	}
	if _, err := eps.Delete(ctx, b.org, ep.ID, cond(stale+", "+now.ETag())); err != nil {
		t.Fatalf("a delete naming a list with the current version: %v", err)
	}
	if _, err := eps.Delete(ctx, b.org, ep.ID, cond("*")); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Fatalf("a deleted endpoint with If-Match: *: %v, want not found", err)
	}
}

// TestEveryUpdateOfAnEndpointGrowsItsVersion reads the module's SQL: each
// statement that updates webhook_endpoints must grow version, or the
// endpoint's ETag stays while what the API shows of it changes, and an
// If-Match read before the change would still hold. The throttle's next
// slot, which the API does not show and every throttled delivery moves, is
// the one column an update may set alone without it.
func TestEveryUpdateOfAnEndpointGrowsItsVersion(t *testing.T) {
	t.Parallel()
	statement := regexp.MustCompile(`(?is)update\s+webhook_endpoints\b.*?\bwhere\b`)
	grows := regexp.MustCompile(`(?i)\bversion\s*=\s*(\w+\.)?version\s*\+\s*1\b`)
	throttleOnly := regexp.MustCompile(`(?is)^update\s+webhook_endpoints\s+set\s+throttle_next\s*=\s*` +
		`greatest\(coalesce\(throttle_next, \$\d\), \$\d\) \+ make_interval\(secs => \$\d\)\s+where$`)
	files, err := filepath.Glob(filepath.Join("internal", "store", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the store's files: %v %v", files, err)
	}
	n := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range statement.FindAll(src, -1) {
			n++
			if !grows.Match(s) && !throttleOnly.Match(s) {
				t.Errorf("%s: an update of webhook_endpoints that leaves version:\n%s", file, s)
			}
		}
	}
	if n < 3 {
		t.Fatalf("found %d updates of webhook_endpoints; the update, the disabling and the health at least", n)
	}
}
