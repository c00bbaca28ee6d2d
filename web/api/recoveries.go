package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// recoveryJSON is a recovery, of an endpoint or of the flows' own webhook
// URLs (endpointId null), as the API shows it.
type recoveryJSON struct {
	ID          string      `json:"id"`
	EndpointID  *string     `json:"endpointId"`
	Host        *string     `json:"host"`
	Since       apiInstant  `json:"since"`
	State       string      `json:"state"`
	Total       int         `json:"total"`
	Scheduled   int         `json:"scheduled"`
	RequestedBy string      `json:"requestedBy"`
	CreatedAt   apiInstant  `json:"createdAt"`
	StartedAt   *apiInstant `json:"startedAt"`
	FinishedAt  *apiInstant `json:"finishedAt"`
	Error       *string     `json:"error"`
}

func toRecoveryJSON(r webhooks.Recovery) recoveryJSON {
	return recoveryJSON{ID: r.ID, EndpointID: nonEmpty(r.EndpointID), Host: nonEmpty(r.Host), Since: apiInstant(r.Since), State: string(r.State), Total: r.Total,
		Scheduled: r.Scheduled, RequestedBy: r.RequestedBy, CreatedAt: apiInstant(r.CreatedAt),
		StartedAt: (*apiInstant)(r.StartedAt), FinishedAt: (*apiInstant)(r.FinishedAt), Error: nonEmpty(r.Error)}
}

// sinceParam reads the query parameter since, an RFC 3339 time; zero when
// it is missing, which the module refuses as it does any other bad time.
func sinceParam(c echo.Context) (time.Time, error) {
	v := c.QueryParam("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, apperr.InvalidFields([]apperr.FieldError{{Field: "since", Message: "must be an RFC 3339 time, such as 2026-01-02T03:04:05Z"}})
	}
	return t, nil
}

// HandleEndpointRecover handles "POST /api/webhook-endpoints/:id/recover":
// every event of the endpoint's types since ?since= that it has not
// received is sent, by a background job whose progress the answer's
// Location shows.
func (h *Handler) HandleEndpointRecover(c echo.Context) error {
	since, err := sinceParam(c)
	if err != nil {
		return err
	}
	ctx, p := c.Request().Context(), httpkit.Principal(c)
	r, err := h.webhooks.Recover(ctx, p.OrganizationID, c.Param("id"), since, "client:"+p.ClientID,
		apiAudited(h, c, identity.AuditWebhookEndpointRecover, func(r webhooks.Recovery) (string, string) {
			return r.EndpointID, httpkit.RecoveryAudit(r)
		}), keepReply(c, recoveryReply))
	if err != nil {
		return httpkit.RecoveryError(ctx, h.webhooks, p.OrganizationID, c.Param("id"), err)
	}
	return h.writeReply(c, recoveryReply(r))
}

// HandleFlowURLRecover handles "POST /api/webhook-recoveries": every
// delivery to a flow's own webhook URL (of ?host= only, when given) that
// failed since ?since= is sent again, by a background job whose progress
// the answer's Location shows.
func (h *Handler) HandleFlowURLRecover(c echo.Context) error {
	since, err := sinceParam(c)
	if err != nil {
		return err
	}
	ctx, p := c.Request().Context(), httpkit.Principal(c)
	r, err := h.webhooks.RecoverFlowURLs(ctx, p.OrganizationID, since, c.QueryParam("host"), "client:"+p.ClientID,
		apiAudited(h, c, identity.AuditWebhookRecover, func(r webhooks.Recovery) (string, string) {
			return r.ID, httpkit.RecoveryAudit(r)
		}), keepReply(c, recoveryReply))
	if err != nil {
		return httpkit.RecoveryError(ctx, h.webhooks, p.OrganizationID, "", err)
	}
	return h.writeReply(c, recoveryReply(r))
}

// recoveryReply answers a new recovery with it, queued: 202, its path in
// Location.
func recoveryReply(r webhooks.Recovery) reply {
	body := toRecoveryJSON(r)
	return reply{status: http.StatusAccepted, header: http.Header{echo.HeaderLocation: {httpkit.RecoveryPath(r.EndpointID, r.ID)}, "Etag": {bodyTag(body)}},
		body: body}
}

// writeRecoveries writes a list of recoveries.
func (h *Handler) writeRecoveries(c echo.Context, list []webhooks.Recovery) error {
	out := struct {
		Data []recoveryJSON `json:"data"`
	}{Data: make([]recoveryJSON, len(list))}
	for i, r := range list {
		out.Data[i] = toRecoveryJSON(r)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleFlowURLRecoveryList handles "GET /api/webhook-recoveries": the
// latest recoveries of the flows' own webhook URLs, newest first.
func (h *Handler) HandleFlowURLRecoveryList(c echo.Context) error {
	list, err := h.webhooks.FlowURLRecoveries(c.Request().Context(), httpkit.Principal(c).OrganizationID)
	if err != nil {
		return err
	}
	return h.writeRecoveries(c, list)
}

// HandleFlowURLRecoveryGet handles "GET /api/webhook-recoveries/:recoveryId".
func (h *Handler) HandleFlowURLRecoveryGet(c echo.Context) error {
	r, err := h.webhooks.FlowURLRecovery(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("recoveryId"))
	if errors.Is(err, webhooks.ErrRecoveryNotFound) {
		return apperr.New(apperr.NotFound, "No recovery of the flows' webhook URLs with this id.")
	}
	if err != nil {
		return err
	}
	return h.writeUnversioned(c, http.StatusOK, toRecoveryJSON(r))
}

// HandleRecoveryList handles "GET /api/webhook-endpoints/:id/recoveries":
// the endpoint's latest recoveries, newest first.
func (h *Handler) HandleRecoveryList(c echo.Context) error {
	list, err := h.webhooks.Recoveries(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"))
	if err != nil {
		return endpointError(err)
	}
	return h.writeRecoveries(c, list)
}

// HandleRecoveryGet handles "GET /api/webhook-endpoints/:id/recoveries/:recoveryId".
func (h *Handler) HandleRecoveryGet(c echo.Context) error {
	r, err := h.webhooks.Recovery(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"), c.Param("recoveryId"))
	if errors.Is(err, webhooks.ErrRecoveryNotFound) {
		return apperr.New(apperr.NotFound, "No recovery with this id for this webhook endpoint.")
	}
	if err != nil {
		return err
	}
	return h.writeUnversioned(c, http.StatusOK, toRecoveryJSON(r))
}
