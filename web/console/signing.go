package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/openapi"
)

// eventCatalog is the OpenAPI document's event catalog, read once.
var eventCatalog = sync.OnceValues(openapi.EventCatalog)

// webhookSigning is the view model of the organization's public signing
// keys (made when first shown) and of the event catalog.
func (h *Handler) webhookSigning(c echo.Context, organizationID string) (pages.WebhookSigning, error) {
	keys, err := h.webhooks.PublicKeys(c.Request().Context(), organizationID)
	if err != nil {
		return pages.WebhookSigning{}, err
	}
	catalog, err := eventCatalog()
	if err != nil {
		return pages.WebhookSigning{}, err
	}
	p := pages.WebhookSigning{KeysURL: h.cfg.BaseURL.String() + "/webhooks/" + url.PathEscape(organizationID) + "/keys"}
	for _, k := range keys {
		row := pages.SigningKeyRow{ID: k.ID, Key: k.Key}
		if k.ExpiresAt != nil {
			row.Expires = Time(*k.ExpiresAt)
		}
		p.Keys = append(p.Keys, row)
	}
	for _, t := range webhooks.EventTypes {
		et, ok := catalog[string(t)]
		if !ok {
			continue
		}
		example, err := json.MarshalIndent(et.Example, "", "  ")
		if err != nil {
			return pages.WebhookSigning{}, err
		}
		p.Catalog = append(p.Catalog, pages.EventTypeRow{Type: et.Type, Description: et.Description, Example: string(example)})
	}
	return p, nil
}

// HandleConsoleSendTestEvent handles "POST /console/webhooks/:id/test"
// (admins): a test event of the type picked, to this endpoint only.
func (h *Handler) HandleConsoleSendTestEvent(c echo.Context) error {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	e, err := h.consoleEndpoint(c)
	if err != nil {
		return err
	}
	sent, err := h.webhooks.SendTestEvent(c.Request().Context(), StaffOf(c).OrganizationID, e.ID, webhooks.EventType(f.Value("event_type")),
		Audited(h, c, identity.AuditWebhookEndpointTest, func(t webhooks.TestEvent) (string, string) {
			return t.EndpointID, string(t.Type) + " " + t.EventID
		}))
	switch {
	case errors.Is(err, webhooks.ErrEndpointDisabled):
		return apperr.New(apperr.Conflict, "The endpoint is disabled; enable it to send it a test event.")
	case err != nil:
		return NotFound(err, webhooks.ErrEndpointNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks", "test_event_sent",
		string(sent.Type)+" to "+endpointHost(e)))
}

// HandleConsoleRotateSigningKey handles "POST /console/webhooks/keys/rotate"
// (admins): a new key pair signs; the previous one signs beside it for
// webhooks.SigningOverlap.
func (h *Handler) HandleConsoleRotateSigningKey(c echo.Context) error {
	if _, err := httpkit.BindForm(c); err != nil {
		return err
	}
	keys, err := h.webhooks.RotateSigningKey(c.Request().Context(), StaffOf(c).OrganizationID,
		Audited(h, c, identity.AuditSigningKeyRotate, func(keys []webhooks.PublicKey) (string, string) {
			return keys[0].ID, "the previous key signs for 24 h"
		}))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks#signing-keys", "signing_key_rotated", keys[0].ID))
}
