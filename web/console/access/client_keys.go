package access

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// clientKeyFormFields maps the identity module's key fields to the form's.
var clientKeyFormFields = map[string]string{"jwks": "jwks", "jwksUri": "jwks_uri"}

// maxJWKSInput bounds the pasted key set: ten 4096-bit RSA keys fit.
const maxJWKSInput = 64 << 10

// clientKeysForm reads a client's public keys from a form: the JWKS text
// area or the jwks_uri field. On the new-client form (choice) they count
// only when private_key_jwt is chosen, and are then required.
func clientKeysForm(f *httpkit.Form, choice bool) (orgs.ClientKeys, pages.ClientKeyFields) {
	fields := pages.ClientKeyFields{Method: f.Value("auth"), JWKS: strings.TrimSpace(f.Value("jwks")),
		JWKSURI: f.Text("jwks_uri", 2000)}
	if choice && fields.Method != identity.AuthPrivateKeyJWT {
		if fields.Method != "" && fields.Method != "secret" {
			f.Fail("auth", "Choose a client secret or private key JWT.")
		}
		return orgs.ClientKeys{}, fields
	}
	if orgs.ContainsPrivateKey([]byte(fields.JWKS)) {
		// Checked again by the identity module; here so that the refused
		// form does not show the private key back.
		f.Fail("jwks", "The key set holds a private key: paste the public keys only. It was not kept.")
		fields.JWKS = ""
	}
	if len(fields.JWKS) > maxJWKSInput {
		f.Fail("jwks", "Paste at most %d KiB.", maxJWKSInput>>10)
	}
	if fields.JWKS == "" && fields.JWKSURI == "" {
		f.Fail("jwks", "Paste the client's public keys (a JSON Web Key Set), or give their URL.")
	}
	return orgs.ClientKeys{JWKS: []byte(fields.JWKS), JWKSURI: fields.JWKSURI}, fields
}

// clientAuthLabel says how a client authenticates, for the client list.
func clientAuthLabel(cl orgs.Client) string {
	var parts []string
	if cl.HasSecret {
		parts = append(parts, "client secret")
	}
	if !cl.Keys.IsZero() {
		parts = append(parts, "private key JWT")
	}
	return strings.Join(parts, ", ")
}

// currentKeys describes a client's registered keys for the keys page.
func currentKeys(cl orgs.Client) string {
	switch {
	case cl.Keys.JWKSURI != "":
		return "Its keys are fetched from " + cl.Keys.JWKSURI + "."
	case !cl.Keys.IsZero():
		return "Its keys were given inline."
	}
	return "It has no keys yet: adding some lets it authenticate with private_key_jwt as well as its secret."
}

// HandleConsoleClientKeys handles "GET /console/credentials/clients/:id/keys" (admins).
func (h *Handler) HandleConsoleClientKeys(c echo.Context) error {
	cl, err := h.consoleClient(c)
	if err != nil {
		return err
	}
	if cl.Revoked() {
		return c.Redirect(http.StatusSeeOther, "/console/credentials")
	}
	fields := pages.ClientKeyFields{JWKS: string(cl.Keys.JWKS), JWKSURI: cl.Keys.JWKSURI}
	return h.renderClientKeys(c, http.StatusOK, cl, fields, nil)
}

func (h *Handler) renderClientKeys(c echo.Context, status int, cl orgs.Client, fields pages.ClientKeyFields, errs map[string]string) error {
	fields.URIAllowed = len(h.cfg.ClientJWKSHosts) > 0 || fields.JWKSURI != ""
	return h.console.Render(c, status, pages.ClientKeys(pages.ClientKeysPage{Frame: h.console.Frame(c, "credentials", "Client keys"),
		ClientID: cl.ID, Name: cl.Name, Current: currentKeys(cl), Keys: fields, Errors: errs}))
}

// HandleConsoleReplaceClientKeys handles "POST /console/credentials/clients/:id/keys"
// (admins): the client's public keys are replaced, and the replacement audited.
func (h *Handler) HandleConsoleReplaceClientKeys(c echo.Context) error {
	cl, err := h.consoleClient(c)
	if err != nil {
		return err
	}
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	keys, fields := clientKeysForm(f, false)
	if !f.Valid() {
		return h.renderClientKeys(c, http.StatusBadRequest, cl, fields, f.Errors)
	}
	cl, err = h.clients.ReplaceClientKeys(c.Request().Context(), console.StaffOf(c).OrganizationID, cl.ID, keys,
		console.Audited(h.console, c, identity.AuditClientKeys, func(cl orgs.Client) (string, string) { return cl.ID, orgs.ClientKeysDetail(cl) }))
	if f.Refused(err, clientKeyFormFields) {
		return h.renderClientKeys(c, http.StatusBadRequest, cl, fields, f.Errors)
	}
	if err != nil {
		return console.NotFound(err, orgs.ErrClientNotFound)
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/credentials", "keys", cl.Name))
}
