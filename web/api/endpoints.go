package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// WebhookEndpoint is an organization's webhook endpoint as the API shows it.
type WebhookEndpoint struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"eventTypes"` // empty: every type
	Enabled     bool     `json:"enabled"`
	// DisabledReason says why flowd disabled the endpoint; null otherwise.
	DisabledReason *string `json:"disabledReason"`
	// FailingSince is the endpoint's first failed delivery since its last
	// success; null while it is healthy.
	FailingSince *apiInstant `json:"failingSince"`
	// DisabledAt is when the endpoint was disabled; null while it is enabled.
	DisabledAt *apiInstant `json:"disabledAt"`
	CreatedAt  apiInstant  `json:"createdAt"`
	UpdatedAt  apiInstant  `json:"updatedAt"`
	Signing    string      `json:"signing"`
	Payload    string      `json:"payload"`
	// Ordering is "none" or "per-flow".
	Ordering string `json:"ordering"`
	// RateLimit is the most deliveries a second; null for no limit.
	RateLimit *int `json:"rateLimit"`
}

// newWebhookEndpoint renders e.
func newWebhookEndpoint(e webhooks.Endpoint) WebhookEndpoint {
	out := WebhookEndpoint{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: make([]string, len(e.EventTypes)),
		Enabled: e.Enabled, DisabledReason: nonEmpty(e.DisabledReason), FailingSince: (*apiInstant)(e.FailingSince),
		DisabledAt: (*apiInstant)(e.DisabledAt), CreatedAt: apiInstant(e.CreatedAt), UpdatedAt: apiInstant(e.UpdatedAt),
		Signing: string(e.Signing), Payload: string(e.Payload), Ordering: string(e.Ordering)}
	if e.RateLimit > 0 {
		out.RateLimit = &e.RateLimit
	}
	for i, t := range e.EventTypes {
		out.EventTypes[i] = string(t)
	}
	return out
}

// endpointRequest is the body of POST /api/webhook-endpoints and of PATCH
// /api/webhook-endpoints/:id. A member left out (or null) keeps its value
// in a PATCH and takes its default in a POST.
type endpointRequest struct {
	URL         *string   `json:"url"`
	Description *string   `json:"description"`
	EventTypes  *[]string `json:"eventTypes"`
	Enabled     *bool     `json:"enabled"`
	Signing     *string   `json:"signing"`
	Payload     *string   `json:"payload"`
	Ordering    *string   `json:"ordering"`
	// RateLimit 0 removes the limit.
	RateLimit *int `json:"rateLimit"`
}

func (r endpointRequest) update() webhooks.EndpointUpdate {
	u := webhooks.EndpointUpdate{URL: r.URL, Description: r.Description, Enabled: r.Enabled,
		Signing: (*webhooks.Signing)(r.Signing), Payload: (*webhooks.Payload)(r.Payload), RateLimit: r.RateLimit}
	if r.Ordering != nil {
		o := webhooks.Ordering(*r.Ordering)
		u.Ordering = &o
	}
	if r.EventTypes != nil {
		types := make([]webhooks.EventType, len(*r.EventTypes))
		for i, t := range *r.EventTypes {
			types[i] = webhooks.EventType(t)
		}
		u.EventTypes = &types
	}
	return u
}

func (r endpointRequest) newEndpoint() webhooks.NewEndpoint {
	u := r.update()
	n := webhooks.NewEndpoint{Enabled: true}
	if u.URL != nil {
		n.URL = *u.URL
	}
	if u.Description != nil {
		n.Description = *u.Description
	}
	if u.EventTypes != nil {
		n.EventTypes = *u.EventTypes
	}
	if u.Enabled != nil {
		n.Enabled = *u.Enabled
	}
	if u.Signing != nil {
		n.Signing = *u.Signing
	}
	if u.Payload != nil {
		n.Payload = *u.Payload
	}
	if u.Ordering != nil {
		n.Ordering = *u.Ordering
	}
	if u.RateLimit != nil {
		n.RateLimit = *u.RateLimit
	}
	return n
}

// endpointRules are the rules the endpoints module holds URLs to, for the
// field errors a body that fails to decode adds (the module checks them
// itself on every write).
func (h *Handler) endpointRules() webhooks.EndpointRules {
	return webhooks.EndpointRules{AllowInsecureURLs: h.cfg.AllowInsecureURLs, AllowPrivate: h.cfg.WebhookAllowPrivate}
}

// endpointError maps the webhooks module's sentinel errors to application errors.
func endpointError(err error) error {
	if errors.Is(err, webhooks.ErrEndpointNotFound) {
		return apperr.New(apperr.NotFound, "No webhook endpoint with this id.")
	}
	return err
}

// apiAudited returns the hook that records an API client's change in the
// audit log in the change's own transaction (database.BeforeCommit), as
// the console does for staff.
func apiAudited[T any](h *Handler, c echo.Context, action string, describe func(done T) (target, detail string)) database.BeforeCommit[T] {
	p := httpkit.Principal(c)
	return func(ctx context.Context, tx database.Tx, done T) error {
		target, detail := describe(done)
		return httpkit.AuditFailed(h.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: p.OrganizationID,
			Actor: "client:" + p.ClientID, Action: action, Target: target, Detail: detail}))
	}
}

// HandleEndpointList handles "GET /api/webhook-endpoints": every endpoint
// of the organization (at most webhooks.MaxEndpoints), newest first.
func (h *Handler) HandleEndpointList(c echo.Context) error {
	list, err := h.endpoints.List(c.Request().Context(), httpkit.Principal(c).OrganizationID, webhooks.NewestFirst)
	if err != nil {
		return err
	}
	out := struct {
		HasMore bool              `json:"has_more"`
		Data    []WebhookEndpoint `json:"data"`
	}{Data: make([]WebhookEndpoint, len(list))}
	for i, e := range list {
		out.Data[i] = newWebhookEndpoint(e)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleEndpointCreate handles "POST /api/webhook-endpoints".
func (h *Handler) HandleEndpointCreate(c echo.Context) error {
	var req endpointRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, req.newEndpoint().Validate(h.endpointRules()))
	}
	answer := func(e webhooks.Endpoint) reply {
		return reply{status: http.StatusCreated, header: http.Header{echo.HeaderLocation: {httpkit.EndpointPath(e.ID)}, "Etag": {e.ETag()}},
			body: newWebhookEndpoint(e)}
	}
	e, err := h.endpoints.Create(c.Request().Context(), httpkit.Principal(c).OrganizationID, req.newEndpoint(),
		apiAudited(h, c, identity.AuditWebhookEndpointCreate, func(e webhooks.Endpoint) (string, string) {
			return e.ID, httpkit.EndpointAudit(e)
		}), keepReply(c, answer))
	if err != nil {
		return endpointError(err)
	}
	return h.writeReply(c, answer(e))
}

// HandleEndpointGet handles "GET /api/webhook-endpoints/:id".
func (h *Handler) HandleEndpointGet(c echo.Context) error {
	e, err := h.endpoints.Get(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"))
	if err != nil {
		return endpointError(err)
	}
	return h.writeResource(c, http.StatusOK, e.ETag(), newWebhookEndpoint(e))
}

// HandleEndpointUpdate handles "PATCH /api/webhook-endpoints/:id": the
// members sent replace the endpoint's.
func (h *Handler) HandleEndpointUpdate(c echo.Context) error {
	var req endpointRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, req.update().Validate(h.endpointRules()))
	}
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	e, err := h.endpoints.Update(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"), req.update(), cond,
		apiAudited(h, c, identity.AuditWebhookEndpointUpdate, func(ch webhooks.EndpointChange) (string, string) {
			return ch.After.ID, ch.Describe() + ": " + httpkit.EndpointAudit(ch.After)
		}))
	if err != nil {
		return endpointError(err)
	}
	return h.writeResource(c, http.StatusOK, e.ETag(), newWebhookEndpoint(e))
}

type deleteEndpointResponse struct {
	Status string `json:"status"`
	ID     string `json:"id"`
}

// HandleEndpointDelete handles "DELETE /api/webhook-endpoints/:id".
func (h *Handler) HandleEndpointDelete(c echo.Context) error {
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	e, err := h.endpoints.Delete(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"), cond,
		apiAudited(h, c, identity.AuditWebhookEndpointDelete, func(e webhooks.Endpoint) (string, string) {
			return e.ID, httpkit.EndpointAudit(e)
		}))
	if err != nil {
		return endpointError(err)
	}
	return httpkit.WriteJSON(c, http.StatusOK, deleteEndpointResponse{Status: "deleted", ID: e.ID})
}
