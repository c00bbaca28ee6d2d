// Package person is what flowd shows the person a flow is about: the
// consent pages a flow's link opens (prove who you are, decide, withdraw,
// and the receipts), their sign-in through an eID, and the public page that
// checks a receipt. Its routes are in web/routes.go.
package person

import (
	"log/slog"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// Deps are what the person's pages call.
type Deps struct {
	Log    *slog.Logger
	Config *config.Config
	// Consent is the person's journey; Receipts checks any receipt.
	Consent  consent.Journey
	Receipts receipts.Checker
	// Mine is the person's own page, /my.
	Mine consent.PersonPage
	// Sessions are the sessions of people who proved who they are through
	// RP, whose ends Audit records.
	Sessions *oidclogin.Sessions
	RP       *oidclogin.RelyingParty
	Audit    httpkit.AuditLog
	// Erasures checks erasure receipts and takes a person's requests to be
	// erased.
	Erasures erasure.Service
}

// Handler holds the person's pages.
type Handler struct {
	log      *slog.Logger
	cfg      *config.Config
	consent  consent.Journey
	receipts receipts.Checker
	mine     consent.PersonPage
	sessions *oidclogin.Sessions
	rp       *oidclogin.RelyingParty
	audit    httpkit.AuditLog
	erasures erasure.Service
}

// New returns the person's pages, calling the modules of d.
func New(d Deps) *Handler {
	return &Handler{log: d.Log, cfg: d.Config, consent: d.Consent, receipts: d.Receipts, mine: d.Mine, sessions: d.Sessions, rp: d.RP, audit: d.Audit, erasures: d.Erasures}
}
