package api

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/openapi"
)

// OrganizationChecker says whether an organization exists, so that the
// public keys of none are not made up.
type OrganizationChecker interface {
	OrganizationExists(ctx context.Context, id string) (bool, error)
}

// webhookKeys is the body of GET /webhooks/:organizationId/keys: a JWKS
// (keys), and the same keys in Standard Webhooks' spelling.
type webhookKeys struct {
	Keys       []webhooks.JWK     `json:"keys"`
	PublicKeys []webhookPublicKey `json:"publicKeys"`
}

type webhookPublicKey struct {
	KeyID     string      `json:"kid"`
	Key       string      `json:"key"`
	ExpiresAt *apiInstant `json:"expiresAt"`
}

// keysMaxAge is how long receivers and caches may keep the published keys:
// far less than the overlap a rotated-out key keeps signing for, so that a
// receiver holding the old set verifies every delivery meanwhile.
const keysMaxAge = "public, max-age=300"

// HandleWebhookKeys handles "GET /webhooks/:organizationId/keys": the
// organization's ed25519 public keys that sign v1a signatures now, for
// receivers, without authentication; they hold no secret.
func (h *Handler) HandleWebhookKeys(c echo.Context) error {
	ctx, org := c.Request().Context(), c.Param("organizationId")
	ok, err := h.organizations.OrganizationExists(ctx, org)
	if err != nil {
		return err
	}
	if !ok {
		return apperr.New(apperr.NotFound, "No organization with this id.")
	}
	keys, err := h.webhooks.PublicKeys(ctx, org)
	if err != nil {
		return err
	}
	out := webhookKeys{Keys: make([]webhooks.JWK, len(keys)), PublicKeys: make([]webhookPublicKey, len(keys))}
	for i, k := range keys {
		out.Keys[i] = k.JWK
		out.PublicKeys[i] = webhookPublicKey{KeyID: k.ID, Key: k.Key, ExpiresAt: (*apiInstant)(k.ExpiresAt)}
	}
	c.Response().Header().Set("Cache-Control", keysMaxAge)
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// eventCatalog is the OpenAPI document's event catalog, read once.
var eventCatalog = sync.OnceValues(openapi.EventCatalog)

// HandleEventTypes handles "GET /api/event-types": every event type, with
// the JSON Schema of its body and an example, from the OpenAPI document.
func (h *Handler) HandleEventTypes(c echo.Context) error {
	catalog, err := eventCatalog()
	if err != nil {
		return err
	}
	out := struct {
		Data []openapi.EventType `json:"data"`
	}{}
	for _, t := range webhooks.EventTypes {
		et, ok := catalog[string(t)]
		if !ok {
			h.log.ErrorContext(c.Request().Context(), "the OpenAPI document has no webhook of this event type", "event_type", t)
			continue
		}
		out.Data = append(out.Data, et)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// testEventRequest is the body of POST /api/webhook-endpoints/:id/test.
type testEventRequest struct {
	EventType string `json:"eventType"`
}

type testEventJSON struct {
	EventID    string `json:"eventId"`
	DeliveryID string `json:"deliveryId"`
	EndpointID string `json:"endpointId"`
	Type       string `json:"type"`
	Test       bool   `json:"test"`
}

func testEventReply(t webhooks.TestEvent) reply {
	return reply{status: http.StatusAccepted, header: http.Header{echo.HeaderLocation: {"/api/events/" + t.EventID}},
		body: testEventJSON{EventID: t.EventID, DeliveryID: t.DeliveryID, EndpointID: t.EndpointID, Type: string(t.Type), Test: true}}
}

// HandleEndpointTest handles "POST /api/webhook-endpoints/:id/test": a
// test event of the type asked for (flow.created by default) with made-up
// data, sent to this endpoint only; the answer's Location is the event.
func (h *Handler) HandleEndpointTest(c echo.Context) error {
	var req testEventRequest
	if c.Request().ContentLength != 0 {
		if err := httpkit.DecodeJSON(c, &req); err != nil {
			return err
		}
	}
	ctx, p := c.Request().Context(), httpkit.Principal(c)
	t, err := h.webhooks.SendTestEvent(ctx, p.OrganizationID, c.Param("id"), webhooks.EventType(req.EventType),
		apiAudited(h, c, identity.AuditWebhookEndpointTest, func(t webhooks.TestEvent) (string, string) {
			return t.EndpointID, string(t.Type) + " " + t.EventID
		}), keepReply(c, testEventReply))
	if errors.Is(err, webhooks.ErrEndpointDisabled) {
		return apperr.New(apperr.Conflict, "The endpoint is disabled; enable it to send it a test event.")
	}
	if err != nil {
		return endpointError(err)
	}
	return h.writeReply(c, testEventReply(t))
}
