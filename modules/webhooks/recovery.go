package webhooks

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/apperr"
)

// A recovery sends again, after an outage of a receiver, what it missed
// since a time, without a redelivery per event. It runs as a background job
// whose progress the API and the console show. A recovery of an endpoint
// sends every event of its types that it has not received: those whose
// delivery to it failed (retries exhausted, 410 Gone, or aborted) and
// those it never had a delivery of, as it was disabled when they were
// published. A recovery of the flows' own webhook URLs sends the deliveries
// to them that failed. Pending deliveries are left to their retries, and
// no event is sent twice to one destination: each has at most one delivery
// to it. This file holds the domain; recovery_job.go runs it.

// RecoveryState is where a recovery is.
type RecoveryState string

const (
	RecoveryQueued  RecoveryState = "queued"  // requested; its job has not started
	RecoveryRunning RecoveryState = "running" // sending again, batch by batch
	RecoveryDone    RecoveryState = "done"    // everything it covers was sent again
	RecoveryFailed  RecoveryState = "failed"  // stopped; Error says why
)

// Active reports whether the recovery is still to finish.
func (s RecoveryState) Active() bool { return s == RecoveryQueued || s == RecoveryRunning }

// Recovery is one request to send what a destination missed again.
type Recovery struct {
	ID string // a UUID v7
	// EndpointID is the endpoint it sends to; empty for a recovery of the
	// flows' own webhook URLs.
	EndpointID string
	// Host limits a recovery of the flows' own URLs to the URLs of one
	// host (and port), as incidents name it; empty: every host.
	Host string
	// Since is the oldest event it covers; it covers those created up to
	// CreatedAt, so that deliveries failing during the recovery do not keep
	// it going. One of an endpoint covers the events the endpoint never had
	// a delivery of only from its creation on.
	Since time.Time
	State RecoveryState
	// Total is how many events it covered when it was requested; once done,
	// how many it sent again (one sent again by hand meanwhile is no
	// longer failed, and is left alone).
	Total int
	// Scheduled is how many it has sent again so far.
	Scheduled int
	// RequestedBy names who asked: "client:<id>" or "staff:<username>".
	RequestedBy string
	CreatedAt   time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	// Error says why a failed recovery stopped; empty otherwise.
	Error string
}

// RecoveriesShown is how many of an endpoint's recoveries Recoveries lists.
const RecoveriesShown = 20

// Errors of recoveries.
var (
	// ErrRecoveryNotFound: no such recovery of the endpoint.
	ErrRecoveryNotFound = errors.New("webhooks: recovery not found")
	// ErrRecoveryRunning: a recovery of the endpoint, or of the flows' own
	// URLs, is queued or running.
	ErrRecoveryRunning = errors.New("webhooks: a recovery is already running")
	// ErrEndpointDisabled: the endpoint is disabled, so it takes no deliveries.
	ErrEndpointDisabled = errors.New("webhooks: the endpoint is disabled")
)

// MaxRecoveryHost is the longest host a recovery of the flows' own URLs
// takes, in bytes: a DNS name and a port.
const MaxRecoveryHost = 260

// Reach is how far back a recovery reaches: the events it looks at are kept
// for the event retention, and what an endpoint received is known while
// its deliveries are kept.
type Reach struct {
	// Events is how long events are kept (FLOWD_EVENT_RETENTION);
	// Deliveries how long finished deliveries are.
	Events, Deliveries time.Duration
}

// Oldest is the oldest since a recovery requested at now takes, and what
// keeps it from reaching further.
func (r Reach) Oldest(now time.Time) (time.Time, string) {
	if r.Deliveries < r.Events {
		return now.Add(-r.Deliveries), "deliveries are kept for " + spellDuration(r.Deliveries)
	}
	return now.Add(-r.Events), "events are kept for " + spellDuration(r.Events) + " (FLOWD_EVENT_RETENTION)"
}

// CheckSince reports an apperr Invalid error naming "since" unless since is
// a time no later than now and within reach.
func CheckSince(since, now time.Time, reach Reach) error {
	var f apperr.Fields
	oldest, why := reach.Oldest(now)
	switch {
	case since.IsZero():
		f.Add("since", "is required: the time from which missed events are sent again")
	case since.After(now):
		f.Add("since", "must not be in the future")
	case since.Before(oldest):
		f.Add("since", "must not be before %s: %s, and older ones cannot be sent again",
			oldest.UTC().Format(time.RFC3339), why)
	}
	return f.Err()
}

// NormalizeHost returns the host a recovery of the flows' own URLs is
// limited to, in lower case, and whether it is one: empty (every host), or
// a host name or address with an optional port, as incidents name it.
func NormalizeHost(host string) (string, bool) {
	host = strings.ToLower(strings.TrimSpace(host))
	if host == "" {
		return "", true
	}
	if len(host) > MaxRecoveryHost || strings.ContainsAny(host, "/?#@ \t") {
		return "", false
	}
	u, err := url.Parse("https://" + host)
	if err != nil || u.Host != host || u.Hostname() == "" {
		return "", false
	}
	return host, true
}
