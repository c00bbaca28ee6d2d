// Package access holds the console's pages of who may reach the
// organization's data: its API clients with their secrets, keys, rate
// limits and DPoP, the webhook signing secret, and the sessions of its staff
// and people. They share the console's frame, notices and audit trail
// through its Handler; their routes are in web/routes.go with the
// console's, behind RequireStaff, and RequireAdmin for changes.
package access

import (
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/console"
)

// Deps are what the access pages' handlers call.
type Deps struct {
	// Console is the console's handler, whose frame and audit trail these
	// pages share.
	Console  *console.Handler
	Config   *config.Config
	Clients  orgs.Clients
	Audit    audit.Log
	Webhooks webhooks.Service
	// Sessions are the records of everyone's sessions.
	Sessions staff.Sessions
	// BuiltInIssuer is the built-in provider's issuer, whose staff the
	// console knows by account.
	BuiltInIssuer string
}

// Handler holds the access pages' handlers.
type Handler struct {
	console       *console.Handler
	cfg           *config.Config
	clients       orgs.Clients
	audit         audit.Log
	webhooks      webhooks.Service
	sessions      staff.Sessions
	builtInIssuer string
}

// New returns the access pages' handlers, calling the modules of d.
func New(d Deps) *Handler {
	return &Handler{console: d.Console, cfg: d.Config, clients: d.Clients, audit: d.Audit, webhooks: d.Webhooks,
		sessions: d.Sessions, builtInIssuer: d.BuiltInIssuer}
}
