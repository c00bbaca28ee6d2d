package httpkit

import (
	"context"
	"errors"
	"net/url"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/webhooks"
)

// EndpointPath is the API's path of a webhook endpoint.
func EndpointPath(id string) string { return "/api/webhook-endpoints/" + url.PathEscape(id) }

// RecoveryPath is the API's path of a recovery of an endpoint, or of the
// flows' own webhook URLs when endpointID is empty.
func RecoveryPath(endpointID, id string) string {
	if endpointID == "" {
		return "/api/webhook-recoveries/" + url.PathEscape(id)
	}
	return EndpointPath(endpointID) + "/recoveries/" + url.PathEscape(id)
}

// Recoveries lists the latest recoveries of an endpoint and of the flows'
// own webhook URLs.
type Recoveries interface {
	Recoveries(ctx context.Context, organizationID, endpointID string) ([]webhooks.Recovery, error)
	FlowURLRecoveries(ctx context.Context, organizationID string) ([]webhooks.Recovery, error)
}

// RecoveryError maps the webhooks module's errors of a recovery request,
// of an endpoint or of the flows' own URLs when endpointID is empty, to
// application errors; a recovery already running is named, with where its
// progress shows.
func RecoveryError(ctx context.Context, hooks Recoveries, organizationID, endpointID string, err error) error {
	if endpointID == "" && errors.Is(err, webhooks.ErrRecoveryRunning) {
		if list, lerr := hooks.FlowURLRecoveries(ctx, organizationID); lerr == nil && len(list) > 0 && list[0].State.Active() {
			return apperr.New(apperr.Conflict, "A recovery of the flows' webhook URLs is already %s (%d of %d deliveries sent again); %s shows its progress.",
				list[0].State, list[0].Scheduled, list[0].Total, RecoveryPath("", list[0].ID))
		}
		return apperr.New(apperr.Conflict, "A recovery of the flows' webhook URLs is already running.")
	}
	switch {
	case errors.Is(err, webhooks.ErrEndpointNotFound):
		return apperr.New(apperr.NotFound, "No webhook endpoint with this id.")
	case errors.Is(err, webhooks.ErrEndpointDisabled):
		return apperr.New(apperr.Conflict, "The endpoint is disabled: enable it, then recover its failed deliveries.")
	case errors.Is(err, webhooks.ErrRecoveryRunning):
		if list, lerr := hooks.Recoveries(ctx, organizationID, endpointID); lerr == nil && len(list) > 0 && list[0].State.Active() {
			return apperr.New(apperr.Conflict, "A recovery of this endpoint is already %s (%d of %d deliveries sent again); %s shows its progress.",
				list[0].State, list[0].Scheduled, list[0].Total, RecoveryPath(endpointID, list[0].ID))
		}
		return apperr.New(apperr.Conflict, "A recovery of this endpoint is already running.")
	}
	return err
}
