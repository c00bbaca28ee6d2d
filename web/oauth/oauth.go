// Package oauth is flowd's built-in OAuth 2.0 and OpenID provider: the
// token, revocation and introspection endpoints of the API's clients, JWKS
// and discovery, and the interactive side (authorize, the staff sign-in
// form and the test eID, userinfo, end-session) that the console's and the
// consent pages' sign-ins use. Its routes are in web/routes.go.
package oauth

import (
	"log/slog"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// Deps are what the provider's handlers call.
type Deps struct {
	Log    *slog.Logger
	Config *config.Config
	// Tokens issues, revokes and introspects the API's tokens and gives the
	// provider's metadata; Nonces gives DPoP's server nonces; JWKS publishes
	// the keys; Audit records the end of staff sessions.
	Tokens tokens.Provider
	Nonces DPoPNonces
	JWKS   keys.Publisher
	Audit  audit.Log
	// Login is the interactive sign-in.
	Login *login.Provider
	// Sessions are the provider's own sessions (single sign-on).
	Sessions *oidclogin.Sessions
}

// Handler holds the provider's handlers.
type Handler struct {
	log      *slog.Logger
	cfg      *config.Config
	tokens   tokens.Provider
	nonces   DPoPNonces
	jwks     keys.Publisher
	audit    audit.Log
	login    *login.Provider
	sessions *oidclogin.Sessions
}

// DPoPNonces gives the server nonce DPoP proofs must carry.
type DPoPNonces interface{ DPoPNonce() string }

// New returns the provider's handlers, calling the modules of d.
func New(d Deps) *Handler {
	return &Handler{log: d.Log, cfg: d.Config, tokens: d.Tokens, nonces: d.Nonces, jwks: d.JWKS, audit: d.Audit, login: d.Login, sessions: d.Sessions}
}

// TestEIDLevels are the levels the test eID offers under m, weakest first:
// those m maps, each with its acr.
func TestEIDLevels(m assurance.ACRMap) []login.TestEIDLevel {
	var out []login.TestEIDLevel
	for _, l := range assurance.Levels {
		if acr := m[l]; acr != "" {
			out = append(out, login.TestEIDLevel{Level: string(l), ACR: acr})
		}
	}
	return out
}
