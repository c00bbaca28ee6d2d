// Package person is what flowd shows the person a flow is about: the
// consent pages a flow's link opens (prove who you are, decide, withdraw,
// and the receipts), their sign-in through an eID, and the public page that
// checks a receipt. Its routes are in web/routes.go.
package person

import (
	"log/slog"
	"time"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/windowlimit"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/oidclogin"
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
	// Notices say which data holders were told that a consent ended; nil
	// shows none.
	Notices ssf.Notices
	// Now is the clock of the limit on the person's own page's writes;
	// time.Now when nil.
	Now func() time.Time
}

// The limit on the writes of the person's own page (a withdrawal, a
// request to be erased): each person may make MyWrites of them within
// MyWriteWindow, counted per instance, so that a signed-in person cannot
// flood the organizations with events and audit entries.
const (
	MyWrites      = 10
	MyWriteWindow = 10 * time.Minute
)

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
	notices  ssf.Notices
	writes   *windowlimit.Limiter // the person's own page's writes, per person
}

// New returns the person's pages, calling the modules of d.
func New(d Deps) *Handler {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Handler{log: d.Log, cfg: d.Config, consent: d.Consent, receipts: d.Receipts, mine: d.Mine, sessions: d.Sessions, rp: d.RP,
		audit: d.Audit, erasures: d.Erasures, notices: d.Notices, writes: windowlimit.New(d.Now, MyWriteWindow, MyWrites)}
}
