package webhooks

import (
	"errors"
	"time"

	"github.com/flowd/flowd/internal/apperr"
)

// A recovery re-sends every delivery to one endpoint that failed since a
// time (issue 20): after an outage of the receiver, the events it missed
// arrive again without a redelivery per event. It runs as a background job
// whose progress the API and the console show. Only failed deliveries are
// sent again (retries exhausted, 410 Gone, or aborted): pending ones are
// still being retried on their schedule. This file holds the domain;
// recovery_job.go runs it.

// RecoveryState is where a recovery is.
type RecoveryState string

const (
	RecoveryQueued  RecoveryState = "queued"  // requested; its job has not started
	RecoveryRunning RecoveryState = "running" // sending again, batch by batch
	RecoveryDone    RecoveryState = "done"    // every failed delivery was sent again
	RecoveryFailed  RecoveryState = "failed"  // stopped; Error says why
)

// Active reports whether the recovery is still to finish.
func (s RecoveryState) Active() bool { return s == RecoveryQueued || s == RecoveryRunning }

// Recovery is one request to send an endpoint's failed deliveries again.
type Recovery struct {
	ID         string // a UUID v7
	EndpointID string
	// Since is the oldest delivery it covers; it covers those created up
	// to CreatedAt, so that deliveries failing during the recovery do not
	// keep it going.
	Since time.Time
	State RecoveryState
	// Total is how many deliveries had failed when it was requested; once
	// done, how many it sent again (a delivery sent again by hand meanwhile
	// is no longer failed, and is left alone).
	Total int
	// Scheduled is how many deliveries it has sent again so far.
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
	// ErrRecoveryRunning: a recovery of the endpoint is queued or running.
	ErrRecoveryRunning = errors.New("webhooks: a recovery of the endpoint is already running")
	// ErrEndpointDisabled: the endpoint is disabled, so it takes no deliveries.
	ErrEndpointDisabled = errors.New("webhooks: the endpoint is disabled")
)

// CheckSince reports an apperr Invalid error naming "since" unless since is
// a time no later than now.
func CheckSince(since, now time.Time) error {
	var f apperr.Fields
	switch {
	case since.IsZero():
		f.Add("since", "is required: the time from which failed deliveries are sent again")
	case since.After(now):
		f.Add("since", "must not be in the future")
	}
	return f.Err()
}
