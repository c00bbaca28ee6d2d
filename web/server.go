// Package web is flowd's echo server: every route in routes.go, the middleware
// every request passes, and the one error handler. The handlers, which bind,
// validate, call a module and render, live in a package per surface: api (the
// JSON API), oauth (the built-in provider and its test eID), console (the
// staff console) and person (the consent pages and the receipt check). What
// they share is in web/internal/httpkit; they do not import one another.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/telemetry"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/api"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/console/access"
	"github.com/flowd/flowd/web/internal/oidclogin"
	"github.com/flowd/flowd/web/oauth"
	"github.com/flowd/flowd/web/person"
)

// Deps are the server's collaborators, all given at construction; New
// refuses a missing one.
type Deps struct {
	Log      *slog.Logger
	Config   *config.Config
	Pool     *pgxpool.Pool
	Registry *prometheus.Registry
	// Tokens is the built-in provider's token service; Bearer verifies
	// the access tokens of API requests; JWKS publishes the keys.
	Tokens tokens.Provider
	Bearer tokens.Verifier
	JWKS   keys.Publisher
	// Organizations and Clients are identity's organizations and their
	// API clients; Audit is the audit log.
	Organizations orgs.Organizations
	Clients       orgs.Clients
	Audit         audit.Log
	// Limits holds API clients to their rate limits.
	Limits   orgs.APILimits
	Flows    flows.Service
	Webhooks webhooks.Service
	// Endpoints are the organizations' webhook endpoints.
	Endpoints webhooks.Endpoints
	// Consent is the individual's journey; ConsentRP (below) proves who they are.
	Consent consent.Journey
	// PersonPage is the person's own page, /my, on the same eID sign-in.
	PersonPage consent.PersonPage
	// Withdrawals are the organizations' withdrawals of accepted consents.
	Withdrawals consent.Withdrawals
	// Definitions are the organizations' consent definitions.
	Definitions consent.Definitions
	// Resources are the data holders' resources.
	Resources consent.Resources
	// Records are the flows' consent records.
	Records consent.Records
	// SSF are the data holders' Shared Signals streams; Notices say which
	// data holders were told that a consent ended (nil: none shown).
	SSF     ssf.Streams
	Notices ssf.Notices
	// Streams are the streams with their backlogs, for the console.
	Streams ssf.Health
	// Receipts checks consent receipts for anyone who has one.
	Receipts receipts.Checker
	// Idempotency keeps the answers to the API's requests that carry an
	// Idempotency-Key (flow creation's are the flows module's).
	Idempotency idempotency.Store
	// Erasures erases people from organizations and checks erasure receipts.
	Erasures erasure.Service

	// Login is the built-in provider's sign-in side. The console's and the
	// consent pages' relying parties are made from Config; ConsoleHTTP is the
	// console's client to its issuer (nil: one with a 10 s timeout).
	Login       *login.Provider
	ConsoleHTTP *http.Client
	// Sessions keeps the records of the console's, the provider's and the
	// consent pages' sessions, so that the server can end them.
	Sessions staff.Sessions
	// Now is the sessions' clock; time.Now when nil.
	Now func() time.Time
	// Tracing gives every request a server span; nil is tracing off.
	Tracing *telemetry.Tracing
}

// TestEIDLevels are the levels the test eID offers under m, weakest first
// (oauth.TestEIDLevels), for the sign-in's configuration.
func TestEIDLevels(m assurance.ACRMap) []login.TestEIDLevel { return oauth.TestEIDLevels(m) }

// Server is flowd's HTTP server.
type Server struct {
	echo    *echo.Echo
	ops     *echo.Echo // the operations listener's routes (Ops)
	log     *slog.Logger
	cfg     *config.Config
	pool    *pgxpool.Pool
	metrics *metrics
	tracing *telemetry.Tracing
	ready   readiness
	// bearer and limits authenticate the API's callers and hold them to
	// their rate limits.
	bearer tokens.Verifier
	limits orgs.APILimits

	// The surfaces, each a package of handlers, all routed in routes.go.
	api     *api.Handler
	oauth   *oauth.Handler
	console *console.Handler
	access  *access.Handler
	person  *person.Handler
}

// New builds the server with every dependency it needs.
func New(d Deps) (*Server, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	if _, ok := d.Log.Handler().(telemetry.LogHandler); !ok {
		d.Log = slog.New(telemetry.NewLogHandler(d.Log.Handler()))
	}
	consoleRP := oidclogin.ConsoleConfig(d.Config)
	consoleRP.HTTPClient = d.ConsoleHTTP
	s := &Server{
		echo: e, log: d.Log, cfg: d.Config, pool: d.Pool, metrics: newMetrics(d.Registry, d.Pool), tracing: d.Tracing,
		bearer: d.Bearer, limits: d.Limits,
		api: api.New(api.Deps{Log: d.Log, Config: d.Config, Audit: d.Audit, Flows: d.Flows, Withdrawals: d.Withdrawals,
			Webhooks: d.Webhooks, Endpoints: d.Endpoints, Definitions: d.Definitions, Receipts: d.Receipts, Idempotency: d.Idempotency,
			Organizations: d.Organizations, Erasures: d.Erasures, Resources: d.Resources, Records: d.Records, SSF: d.SSF}),
		oauth: oauth.New(oauth.Deps{Log: d.Log, Config: d.Config, Tokens: d.Tokens, Nonces: d.Bearer, JWKS: d.JWKS, Audit: d.Audit,
			Login: d.Login, Sessions: oidclogin.ProviderSessions(d.Config, d.Sessions, d.Now)}),
		console: console.New(console.Deps{Log: d.Log, Config: d.Config, Organizations: d.Organizations, Clients: d.Clients, Audit: d.Audit,
			Flows: d.Flows, Withdrawals: d.Withdrawals, Webhooks: d.Webhooks, Endpoints: d.Endpoints, Definitions: d.Definitions, Consent: d.Consent,
			Idempotency: d.Idempotency, Sessions: d.Sessions, StaffSessions: oidclogin.ConsoleSessions(d.Config, d.Sessions, d.Now),
			RP: oidclogin.New(consoleRP), BuiltInIssuer: d.Login.Issuer(), Erasures: d.Erasures, Resources: d.Resources,
			Notices: d.Notices, Streams: d.Streams}),
		person: person.New(person.Deps{Log: d.Log, Config: d.Config, Consent: d.Consent, Receipts: d.Receipts, Mine: d.PersonPage,
			Sessions: oidclogin.ConsentSessions(d.Config, d.Sessions, d.Now), RP: oidclogin.New(oidclogin.ConsentConfig(d.Config)), Audit: d.Audit, Erasures: d.Erasures,
			Notices: d.Notices, Now: d.Now}),
	}
	s.access = access.New(access.Deps{Console: s.console, Config: d.Config, Clients: d.Clients, Audit: d.Audit, Webhooks: d.Webhooks,
		Sessions: d.Sessions, BuiltInIssuer: d.Login.Issuer()})
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = ipExtractor(d.Config.TrustedProxies)
	s.routes()
	s.ops = echo.New()
	s.ops.HideBanner, s.ops.HidePort = true, true
	s.opsRoutes(s.ops)
	return s, nil
}

// Ops is the handler of the operations listener (FLOWD_OPS_ADDR): metrics,
// health and readiness, the last saying "draining" as the public one does.
func (s *Server) Ops() http.Handler { return s.ops }

// ipExtractor is how c.RealIP() finds a request's source: the connection's
// peer, unless the peer is one of trusted, when X-Forwarded-For is read from
// the right, each trusted hop skipped, to the first address not trusted.
// Loopback, link-local and private addresses are trusted only when listed:
// echo trusts them by default, which would let anyone on those networks
// choose their address.
func ipExtractor(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// check names the first collaborator missing from d.
func (d Deps) check() error {
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Log", d.Log == nil}, {"Config", d.Config == nil}, {"Pool", d.Pool == nil}, {"Registry", d.Registry == nil},
		{"Tokens", d.Tokens == nil}, {"Bearer", d.Bearer == nil}, {"JWKS", d.JWKS == nil}, {"Organizations", d.Organizations == nil},
		{"Clients", d.Clients == nil}, {"Audit", d.Audit == nil}, {"Limits", d.Limits == nil}, {"Flows", d.Flows == nil}, {"Webhooks", d.Webhooks == nil}, {"Endpoints", d.Endpoints == nil},
		{"Consent", d.Consent == nil}, {"PersonPage", d.PersonPage == nil}, {"Withdrawals", d.Withdrawals == nil}, {"Definitions", d.Definitions == nil}, {"Resources", d.Resources == nil}, {"Records", d.Records == nil}, {"SSF", d.SSF == nil}, {"Receipts", d.Receipts == nil}, {"Login", d.Login == nil},
		{"Sessions", d.Sessions == nil}, {"Idempotency", d.Idempotency == nil}, {"Erasures", d.Erasures == nil},
	} {
		if dep.missing {
			return fmt.Errorf("web: New needs %s", dep.name)
		}
	}
	return nil
}

// ServeHTTP makes the server an http.Handler, for tests and embedding.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Echo exposes the router so tests can mount extra routes.
func (s *Server) Echo() *echo.Echo { return s.echo }

// Serve answers requests on ln until ctx ends, then drains: /readyz answers
// 503 while it goes on serving for the shutdown delay, so that load
// balancers stop sending it requests; then it stops accepting connections
// and lets in-flight requests finish for up to the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served: // the listener failed
		_ = srv.Close()
		return err
	case <-ctx.Done():
	}

	delay := s.cfg.ShutdownDelay
	if delay > 0 {
		// Connections close after their next response, so that clients
		// reconnect through the load balancer to another instance; from
		// the first response that says the instance is draining on.
		srv.SetKeepAlivesEnabled(false)
	}
	s.ready.draining.Store(true)
	if delay > 0 {
		s.log.InfoContext(ctx, "draining: not ready, still serving", "delay", delay.String())
		after := s.ready.drainDelay
		if after == nil {
			after = time.After
		}
		select {
		case err := <-served:
			_ = srv.Close()
			return err
		case <-after(delay):
		}
	}
	timeout := s.cfg.ShutdownTimeout
	s.log.InfoContext(ctx, "shutting down: finishing in-flight requests", "timeout", timeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.WarnContext(ctx, "drain timed out; closing remaining connections")
		err = srv.Close()
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
