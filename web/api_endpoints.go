package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
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
}

// newWebhookEndpoint renders e.
func newWebhookEndpoint(e webhooks.Endpoint) WebhookEndpoint {
	out := WebhookEndpoint{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: make([]string, len(e.EventTypes)),
		Enabled: e.Enabled, DisabledReason: nonEmpty(e.DisabledReason), FailingSince: (*apiInstant)(e.FailingSince),
		DisabledAt: (*apiInstant)(e.DisabledAt), CreatedAt: apiInstant(e.CreatedAt), UpdatedAt: apiInstant(e.UpdatedAt)}
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
}

func (r endpointRequest) update() webhooks.EndpointUpdate {
	u := webhooks.EndpointUpdate{URL: r.URL, Description: r.Description, Enabled: r.Enabled}
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
	return n
}

// endpointRules are the rules the endpoints module holds URLs to, for the
// field errors a body that fails to decode adds (the module checks them
// itself on every write).
func (s *Server) endpointRules() webhooks.EndpointRules {
	return webhooks.EndpointRules{AllowInsecureURLs: s.cfg.AllowInsecureURLs, AllowPrivate: s.cfg.WebhookAllowPrivate}
}

// endpointError maps the webhooks module's sentinel errors to application errors.
func endpointError(err error) error {
	if errors.Is(err, webhooks.ErrEndpointNotFound) {
		return apperr.New(apperr.NotFound, "No webhook endpoint with this id.")
	}
	return err
}

func endpointPath(id string) string { return "/api/webhook-endpoints/" + url.PathEscape(id) }

// endpointAudit describes an endpoint for the audit log: its origin (never
// its path or query, which may hold a token of the receiver's), the types it
// takes and whether it is enabled, within the log's 500 characters.
func endpointAudit(e webhooks.Endpoint) string {
	origin := e.URL
	if u, err := url.Parse(e.URL); err == nil {
		origin = u.Scheme + "://" + u.Host
	}
	types := "all events"
	if len(e.EventTypes) > 0 {
		s := make([]string, len(e.EventTypes))
		for i, t := range e.EventTypes {
			s[i] = string(t)
		}
		types = strings.Join(s, " ")
	}
	state := "enabled"
	if !e.Enabled {
		state = "disabled"
	}
	return truncateRunes(origin, 300) + "; " + types + "; " + state
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// apiAudited returns the hook that records an API client's change in the
// audit log in the change's own transaction (database.BeforeCommit), as
// audited does for staff.
func apiAudited[T any](s *Server, c echo.Context, action string, describe func(done T) (target, detail string)) database.BeforeCommit[T] {
	p := principalOf(c)
	return func(ctx context.Context, tx database.Tx, done T) error {
		target, detail := describe(done)
		return auditFailed(s.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: p.OrganizationID,
			Actor: "client:" + p.ClientID, Action: action, Target: target, Detail: detail}))
	}
}

// handleEndpointList handles "GET /api/webhook-endpoints": every endpoint
// of the organization (at most webhooks.MaxEndpoints), newest first.
func (s *Server) handleEndpointList(c echo.Context) error {
	list, err := s.endpoints.List(c.Request().Context(), principalOf(c).OrganizationID, webhooks.NewestFirst)
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
	return s.writeJSON(c, http.StatusOK, out)
}

// handleEndpointCreate handles "POST /api/webhook-endpoints".
func (s *Server) handleEndpointCreate(c echo.Context) error {
	var req endpointRequest
	if err := decodeJSON(c, &req); err != nil {
		return withFieldErrors(err, req.newEndpoint().Validate(s.endpointRules()))
	}
	answer := func(e webhooks.Endpoint) reply {
		return reply{status: http.StatusCreated, header: http.Header{echo.HeaderLocation: {endpointPath(e.ID)}, "Etag": {e.ETag()}},
			body: newWebhookEndpoint(e)}
	}
	e, err := s.endpoints.Create(c.Request().Context(), principalOf(c).OrganizationID, req.newEndpoint(),
		apiAudited(s, c, identity.AuditWebhookEndpointCreate, func(e webhooks.Endpoint) (string, string) {
			return e.ID, endpointAudit(e)
		}), keepReply(c, answer))
	if err != nil {
		return endpointError(err)
	}
	return s.writeReply(c, answer(e))
}

// handleEndpointGet handles "GET /api/webhook-endpoints/:id".
func (s *Server) handleEndpointGet(c echo.Context) error {
	e, err := s.endpoints.Get(c.Request().Context(), principalOf(c).OrganizationID, c.Param("id"))
	if err != nil {
		return endpointError(err)
	}
	return s.writeResource(c, http.StatusOK, e.ETag(), newWebhookEndpoint(e))
}

// handleEndpointUpdate handles "PATCH /api/webhook-endpoints/:id": the
// members sent replace the endpoint's.
func (s *Server) handleEndpointUpdate(c echo.Context) error {
	var req endpointRequest
	if err := decodeJSON(c, &req); err != nil {
		return withFieldErrors(err, req.update().Validate(s.endpointRules()))
	}
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	e, err := s.endpoints.Update(c.Request().Context(), principalOf(c).OrganizationID, c.Param("id"), req.update(), cond,
		apiAudited(s, c, identity.AuditWebhookEndpointUpdate, func(ch webhooks.EndpointChange) (string, string) {
			return ch.After.ID, ch.Describe() + ": " + endpointAudit(ch.After)
		}))
	if err != nil {
		return endpointError(err)
	}
	return s.writeResource(c, http.StatusOK, e.ETag(), newWebhookEndpoint(e))
}

type deleteEndpointResponse struct {
	Status string `json:"status"`
	ID     string `json:"id"`
}

// handleEndpointDelete handles "DELETE /api/webhook-endpoints/:id".
func (s *Server) handleEndpointDelete(c echo.Context) error {
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	e, err := s.endpoints.Delete(c.Request().Context(), principalOf(c).OrganizationID, c.Param("id"), cond,
		apiAudited(s, c, identity.AuditWebhookEndpointDelete, func(e webhooks.Endpoint) (string, string) {
			return e.ID, endpointAudit(e)
		}))
	if err != nil {
		return endpointError(err)
	}
	return s.writeJSON(c, http.StatusOK, deleteEndpointResponse{Status: "deleted", ID: e.ID})
}
