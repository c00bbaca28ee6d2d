// Package api is flowd's JSON API under /api: flows, their receipts and
// tasks, events, consent definitions, webhook endpoints and their
// recoveries. Its routes are in web/routes.go, behind the authentication of
// httpkit.Authenticate; every POST that changes something honours
// Idempotency-Key (Idempotent).
package api

import (
	"log/slog"
	"sync"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// Deps are the modules the API's handlers call.
type Deps struct {
	Log    *slog.Logger
	Config *config.Config
	// Audit records the API clients' changes.
	Audit httpkit.AuditLog
	Flows flows.Service
	// Withdrawals are the organizations' withdrawals of accepted consents.
	Withdrawals consent.Withdrawals
	Webhooks    webhooks.Service
	Endpoints   webhooks.Endpoints
	Definitions consent.Definitions
	Receipts    receipts.Checker
	// Idempotency keeps the answers to requests that carry an
	// Idempotency-Key.
	Idempotency idempotency.Store
	// Organizations say which organizations' public keys may be published.
	Organizations OrganizationChecker
	// Erasures erases people from organizations.
	Erasures erasure.Service
	// Resources are the data holders' resources.
	Resources consent.Resources
	// Records are the flows' consent records.
	Records consent.Records
	// SSF are the data holders' Shared Signals streams.
	SSF ssf.Streams
}

// Handler holds the API's handlers.
type Handler struct {
	log           *slog.Logger
	cfg           *config.Config
	audit         httpkit.AuditLog
	flows         flows.Service
	withdrawals   consent.Withdrawals
	webhooks      webhooks.Service
	endpoints     webhooks.Endpoints
	definitions   consent.Definitions
	receipts      receipts.Checker
	answers       idempotency.Store
	organizations OrganizationChecker
	erasures      erasure.Service
	resources     consent.Resources
	records       consent.Records
	// schema is the consent record's JSON Schema, made once.
	schemaOnce sync.Once
	schema     []byte
	ssf        ssf.Streams
}

// New returns the API's handlers, calling the modules of d.
func New(d Deps) *Handler {
	return &Handler{log: d.Log, cfg: d.Config, audit: d.Audit, flows: d.Flows, withdrawals: d.Withdrawals, webhooks: d.Webhooks, endpoints: d.Endpoints,
		definitions: d.Definitions, receipts: d.Receipts, answers: d.Idempotency, organizations: d.Organizations,
		erasures: d.Erasures, resources: d.Resources, records: d.Records, ssf: d.SSF}
}
