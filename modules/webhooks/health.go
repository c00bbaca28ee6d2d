package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
	"github.com/flowd/flowd/modules/webhooks/internal/payload"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// An endpoint whose deliveries keep failing is disabled: once
// they have failed for Options.DisableAfter without a success in between,
// the failed attempt that finds it so disables the endpoint, fails its
// pending deliveries, and tells the organization's other endpoints with an
// endpoint.disabled event. RecordAttempt keeps each endpoint's failing_since
// in the attempt's own statement; this file acts on it.

// DefaultDisableAfter is how long an endpoint's deliveries may fail without
// a success before flowd disables it: long enough to outlast a weekend's
// outage and the whole retry schedule of the events sent meanwhile.
const DefaultDisableAfter = 5 * 24 * time.Hour

// disableFailing disables the endpoint of the delivery just recorded when
// the attempt failed and the endpoint has failed for DisableAfter; failure
// is the attempt's failure, which names neither the URL's path nor its
// query. Disabling that fails is logged, and the endpoint's next failed
// attempt tries again.
func (m *Module) disableFailing(ctx context.Context, organizationID string, rec store.Recorded, failure string) {
	if rec.FailingFor == nil || *rec.FailingFor < m.disableAfter {
		return
	}
	e, err := m.disableEndpoint(ctx, organizationID, rec.EndpointID, *rec.FailingFor, failure)
	if errors.Is(err, database.ErrNotFound) {
		return // another attempt disabled it first, or it is healthy again
	}
	log := m.log.With("organization_id", organizationID, "endpoint_id", rec.EndpointID)
	if err != nil {
		log.ErrorContext(ctx, "webhook: disabling a failing endpoint; will try again at its next failure", "error", err.Error())
		return
	}
	log.WarnContext(ctx, "webhook endpoint disabled: its deliveries kept failing", "host", delivery.HostOf(e.URL),
		"failing_since", e.FailingSince, "reason", e.DisabledReason)
}

// disableEndpoint disables the endpoint, in one transaction with failing
// its pending deliveries and publishing endpoint.disabled, and returns it.
// database.ErrNotFound when it is not due (any more).
func (m *Module) disableEndpoint(ctx context.Context, organizationID, endpointID string, failingFor time.Duration, failure string) (Endpoint, error) {
	reason := fmt.Sprintf("Deliveries failed for %s without a success; the last failure: %s.", spellDuration(failingFor), failure)
	var out Endpoint
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		// The deliveries first, then the endpoint: the order in which
		// RecordAttempt locks them, so that a success recorded meanwhile
		// waits or is waited for, never deadlocks, and when it commits
		// first the endpoint is no longer due and all of this rolls back.
		// The failed deliveries' jobs end at their next run without sending,
		// as a failed delivery's do; cancelling them here would cost a
		// statement per delivery, and a dead endpoint may have thousands.
		if _, err := store.FailPendingDeliveries(ctx, tx, organizationID, endpointID,
			"Not sent: flowd disabled the endpoint. "+reason); err != nil {
			return err
		}
		row, err := store.DisableFailing(ctx, tx, organizationID, endpointID, m.disableAfter, reason)
		if err != nil {
			return err
		}
		out = fromEndpointRow(row)
		return m.publishDisabledTx(ctx, tx, out)
	})
	if err != nil && !errors.Is(err, database.ErrNotFound) {
		return Endpoint{}, fmt.Errorf("webhooks: disable endpoint: %w", database.Classify(err))
	}
	return out, err
}

// publishDisabledTx stores the endpoint.disabled event of e, just disabled
// in tx, and fans it out to the organization's endpoints that take it (e
// no longer among them).
func (m *Module) publishDisabledTx(ctx context.Context, tx database.Tx, e Endpoint) error {
	at := e.UpdatedAt
	b, err := json.Marshal(payload.Endpoint{Type: string(EndpointDisabled), Timestamp: payload.Time(at), Data: payload.EndpointData{
		EndpointID: e.ID, OrganizationID: e.OrganizationID, URL: payload.Origin(e.URL), Reason: e.DisabledReason,
		FailingSince: payload.Time(*e.FailingSince), DisabledAt: payload.Time(at),
	}})
	if err != nil {
		return err
	}
	ev := store.StoredEvent{ID: uuid.Must(uuid.NewV7()).String(), OrganizationID: e.OrganizationID,
		Type: string(EndpointDisabled), Body: string(b)}
	targets, err := store.InsertEvent(ctx, tx, ev, nil)
	if err != nil || len(targets) == 0 {
		return err
	}
	return m.fanOutTx(ctx, tx, ev, targets)
}

// spellDuration says how long d is in its largest whole unit, for people:
// "5 days", "1 hour", "30 seconds".
func spellDuration(d time.Duration) string {
	for _, u := range []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}} {
		if d >= u.size {
			return plural(int(d/u.size), u.name)
		}
	}
	return plural(int(d/time.Second), "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
