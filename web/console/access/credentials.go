package access

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// HandleConsoleCredentials handles "GET /console/credentials": the API
// clients and the webhook signing secret (never its value here).
func (h *Handler) HandleConsoleCredentials(c echo.Context) error {
	ctx := c.Request().Context()
	org := console.StaffOf(c).OrganizationID
	clients, err := h.clients.ListClients(ctx, org)
	if err != nil {
		return err
	}
	p := pages.CredentialsPage{Frame: h.console.Frame(c, "credentials", "Credentials"), TokenURL: h.cfg.URL("/oauth/token"), SecretCreated: "—"}
	for _, cl := range clients {
		p.Clients = append(p.Clients, pages.ClientRow{ID: cl.ID, Name: cl.Name, Scopes: strings.Join(cl.Scopes, " "), Sandbox: cl.Sandbox, DPoP: cl.DPoPBound,
			Created: console.Time(cl.CreatedAt), LastUsed: console.TimePtr(cl.LastUsedAt, "never"), Revoked: console.TimePtr(cl.RevokedAt, ""),
			Auth: clientAuthLabel(cl), HasSecret: cl.HasSecret, RateLimit: rateLimitLabel(cl.RateLimit, h.cfg.APIRateLimit)})
	}
	if sec, err := h.webhooks.CurrentSecret(ctx, org); err == nil {
		p.SecretCreated = console.Time(sec.CreatedAt)
	} else if !errors.Is(err, webhooks.ErrNotFound) {
		return err
	}
	return h.console.Render(c, http.StatusOK, pages.Credentials(p))
}

// HandleConsoleNewClient handles "GET /console/credentials/clients/new" (admins).
func (h *Handler) HandleConsoleNewClient(c echo.Context) error {
	return h.renderClientForm(c, http.StatusOK, pages.ClientFormPage{Scopes: map[string]bool{identity.ScopeFlowsRead: true, identity.ScopeFlowsWrite: true}})
}

// renderClientForm renders the new-client form p with the page's frame
// and choices filled in.
func (h *Handler) renderClientForm(c echo.Context, status int, p pages.ClientFormPage) error {
	p.Frame, p.AllScopes = h.console.Frame(c, "credentials", "New API client"), identity.AllScopes
	p.Keys.URIAllowed = len(h.cfg.ClientJWKSHosts) > 0 || p.Keys.JWKSURI != ""
	return h.console.Render(c, status, pages.ClientForm(p))
}

// HandleConsoleCreateClient handles "POST /console/credentials/clients"
// (admins): the client is made and its secret shown once (or its public
// keys registered, for private_key_jwt); it obtains tokens at once.
func (h *Handler) HandleConsoleCreateClient(c echo.Context) error {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	name := f.Text("name", 200)
	scopes := f.All("scopes")
	sandbox := f.Bool("sandbox")
	dpop := f.Bool("dpop")
	if len(scopes) == 0 {
		f.Fail("scopes", "Choose at least one scope.")
	}
	chosen := map[string]bool{}
	for _, sc := range scopes {
		chosen[sc] = true
	}
	keys, keyFields := clientKeysForm(f, true)
	again := pages.ClientFormPage{Name: name, Scopes: chosen, Sandbox: sandbox, DPoP: dpop, Keys: keyFields, Errors: f.Errors}
	if !f.Valid() {
		return h.renderClientForm(c, http.StatusBadRequest, again)
	}
	creds, err := h.clients.CreateClient(c.Request().Context(), orgs.NewClient{OrganizationID: console.StaffOf(c).OrganizationID,
		Name: name, Scopes: scopes, Sandbox: sandbox, Keys: keys, DPoPBound: dpop},
		console.Audited(h.console, c, identity.AuditClientCreate, func(cc orgs.ClientCredentials) (string, string) {
			return cc.ID, orgs.ClientCreatedDetail(cc.Client)
		}))
	if f.Refused(err, clientKeyFormFields) {
		return h.renderClientForm(c, http.StatusBadRequest, again)
	}
	if err != nil {
		return console.NotFound(err, orgs.ErrOrganizationNotFound)
	}
	intro := "Use the client id and secret at the token endpoint (client credentials grant)."
	if creds.Secret == "" {
		intro = "The client has no secret: it authenticates at the token endpoint with a JWT signed by one of its registered keys (private_key_jwt)."
	}
	return h.console.Render(c, http.StatusCreated, pages.Secret(pages.SecretPage{Frame: h.console.Frame(c, "credentials", "API client created"),
		Heading: "API client created", Intro: intro,
		Label: "Client secret", Secret: creds.Secret, Details: clientDetails(h, creds.Client),
		BackURL: "/console/credentials", Back: "Done"}))
}

func clientDetails(h *Handler, cl orgs.Client) []pages.KV {
	env := "production"
	if cl.Sandbox {
		env = "sandbox"
	}
	return []pages.KV{{Label: "Name", Value: cl.Name}, {Label: "Client id", Value: cl.ID, Code: true},
		{Label: "Scopes", Value: strings.Join(cl.Scopes, " ")}, {Label: "Environment", Value: env},
		{Label: "Authentication", Value: strings.Join(cl.AuthMethods(), " ")},
		{Label: "Token endpoint", Value: h.cfg.URL("/oauth/token"), Code: true}}
}

// consoleClient finds one of the organization's clients by the path's id.
func (h *Handler) consoleClient(c echo.Context) (orgs.Client, error) {
	clients, err := h.clients.ListClients(c.Request().Context(), console.StaffOf(c).OrganizationID)
	if err != nil {
		return orgs.Client{}, err
	}
	i := slices.IndexFunc(clients, func(cl orgs.Client) bool { return cl.ID == c.Param("id") })
	if i < 0 {
		return orgs.Client{}, console.ErrNotFound
	}
	return clients[i], nil
}

// HandleConsoleRotateClientConfirm handles "GET /console/credentials/clients/:id/rotate" (admins).
func (h *Handler) HandleConsoleRotateClientConfirm(c echo.Context) error {
	cl, err := h.consoleClient(c)
	if err != nil {
		return err
	}
	return h.console.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.console.Frame(c, "credentials", "Rotate secret"),
		Heading: "Rotate the secret of " + cl.Name + "?", Message: "A new secret is made and shown once. The current secret and the client's refresh tokens stop working at once.",
		Details: []pages.KV{{Label: "Client id", Value: cl.ID, Code: true}}, Action: "/console/credentials/clients/" + cl.ID + "/rotate",
		Button: "Rotate secret", Danger: true, BackURL: "/console/credentials"}))
}

// HandleConsoleRotateClient handles "POST /console/credentials/clients/:id/rotate" (admins).
func (h *Handler) HandleConsoleRotateClient(c echo.Context) error {
	creds, err := h.clients.RotateClientSecret(c.Request().Context(), console.StaffOf(c).OrganizationID, c.Param("id"),
		console.Audited(h.console, c, identity.AuditClientRotate, func(cc orgs.ClientCredentials) (string, string) { return cc.ID, cc.Name }))
	if err != nil {
		return console.NotFound(err, orgs.ErrClientNotFound)
	}
	return h.console.Render(c, http.StatusOK, pages.Secret(pages.SecretPage{Frame: h.console.Frame(c, "credentials", "New client secret"),
		Heading: "New secret for " + creds.Name, Intro: "The previous secret no longer works.",
		Label: "Client secret", Secret: creds.Secret, Details: clientDetails(h, creds.Client), BackURL: "/console/credentials", Back: "Done"}))
}

// HandleConsoleRevokeClientConfirm handles "GET /console/credentials/clients/:id/revoke" (admins).
func (h *Handler) HandleConsoleRevokeClientConfirm(c echo.Context) error {
	cl, err := h.consoleClient(c)
	if err != nil {
		return err
	}
	if cl.Revoked() {
		return c.Redirect(http.StatusSeeOther, "/console/credentials")
	}
	return h.console.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.console.Frame(c, "credentials", "Revoke client"),
		Heading: "Revoke " + cl.Name + "?", Message: "The client can obtain no more tokens, and the tokens it holds stop working at once. This cannot be undone.",
		Details: []pages.KV{{Label: "Client id", Value: cl.ID, Code: true}, {Label: "Last used", Value: console.TimePtr(cl.LastUsedAt, "never")}},
		Action:  "/console/credentials/clients/" + cl.ID + "/revoke", Button: "Revoke client", Danger: true, BackURL: "/console/credentials"}))
}

// HandleConsoleRevokeClient handles "POST /console/credentials/clients/:id/revoke" (admins).
func (h *Handler) HandleConsoleRevokeClient(c echo.Context) error {
	cl, err := h.clients.RevokeClient(c.Request().Context(), console.StaffOf(c).OrganizationID, c.Param("id"),
		console.Audited(h.console, c, identity.AuditClientRevoke, func(cl orgs.Client) (string, string) { return cl.ID, cl.Name }))
	if err != nil {
		return console.NotFound(err, orgs.ErrClientNotFound)
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/credentials", "revoked", cl.Name))
}

// HandleConsoleRevealWebhookSecret handles "POST /console/credentials/webhook-secret/reveal"
// (admins): the secret that signs now, shown on a page that is not cached,
// recorded in the audit log. A reveal changes nothing, so there is no
// transaction to join: the entry is written first, and the secret shown only
// once it has committed (no record, no reveal). The secret is read before,
// so that an organization without one records nothing; reading it reveals
// nothing.
func (h *Handler) HandleConsoleRevealWebhookSecret(c echo.Context) error {
	sec, err := h.webhooks.CurrentSecret(c.Request().Context(), console.StaffOf(c).OrganizationID)
	if err != nil {
		return console.NotFound(err, webhooks.ErrNotFound)
	}
	if err := h.console.AuditFirst(c, identity.AuditWebhookSecretReveal, "webhook secret", ""); err != nil {
		return err
	}
	return h.console.Render(c, http.StatusOK, pages.Secret(pages.SecretPage{Frame: h.console.Frame(c, "credentials", "Webhook signing secret"),
		Heading: "Webhook signing secret", Intro: "Configure your webhook receiver with this secret to verify the webhook-signature header.",
		Label: "Signing secret", Secret: sec.Value, Details: []pages.KV{{Label: "Made", Value: console.Time(sec.CreatedAt)}},
		BackURL: "/console/credentials", Back: "Back to credentials"}))
}

// HandleConsoleRotateWebhookSecretConfirm handles "GET /console/credentials/webhook-secret/rotate" (admins).
func (h *Handler) HandleConsoleRotateWebhookSecretConfirm(c echo.Context) error {
	return h.console.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.console.Frame(c, "credentials", "Rotate webhook secret"),
		Heading: "Rotate the webhook signing secret?", Message: "A new secret is made and shown once. For the next 24 hours every webhook carries signatures by both the new and the previous secret, so your receivers can switch over without missing an event.",
		Action: "/console/credentials/webhook-secret/rotate", Button: "Rotate secret", BackURL: "/console/credentials"}))
}

// HandleConsoleRotateWebhookSecret handles "POST /console/credentials/webhook-secret/rotate" (admins).
func (h *Handler) HandleConsoleRotateWebhookSecret(c echo.Context) error {
	sec, err := h.webhooks.RotateSecret(c.Request().Context(), console.StaffOf(c).OrganizationID,
		console.Audited(h.console, c, identity.AuditWebhookSecretRotate, func(webhooks.Secret) (string, string) {
			return "webhook secret", "previous secret signs for 24 h"
		}))
	if err != nil {
		return console.NotFound(err, webhooks.ErrNotFound)
	}
	return h.console.Render(c, http.StatusOK, pages.Secret(pages.SecretPage{Frame: h.console.Frame(c, "credentials", "New webhook secret"),
		Heading: "New webhook signing secret", Intro: "The previous secret keeps signing beside this one for 24 hours.",
		Label: "Signing secret", Secret: sec.Value, Details: []pages.KV{{Label: "Made", Value: console.Time(sec.CreatedAt)}},
		BackURL: "/console/credentials", Back: "Done"}))
}
