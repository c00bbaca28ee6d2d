package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/jobmetrics"
	"github.com/flowd/flowd/internal/telemetry"
	"github.com/flowd/flowd/internal/version"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web"
)

// runServe handles "flowd serve": it migrates (unless told not to), builds
// every module, and serves until ctx ends. What it opens is closed by a
// defer right where it is opened, and what runs beside the server is a
// runner, joined before runServe returns (see serveWith).
func runServe(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen address (default FLOWD_ADDR or :8080)")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(sys.Getenv, config.Need{Database: true, Secrets: true})
	if err != nil {
		return err
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	log := wiring.NewLogger(sys.Stderr, cfg.LogLevel)
	tuneGC(sys.Getenv)
	tracing, err := telemetry.Setup(ctx, sys.Getenv, version.Get().Version, log)
	if err != nil {
		return err
	}
	// Spans still buffered are exported after everything else has stopped.
	defer func() {
		stopping, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(stopping); err != nil {
			log.Warn("exporting the last spans", "error", err.Error())
		}
	}()

	pool, err := database.OpenTraced(ctx, cfg.DatabaseURL, cfg.DBMaxConns, tracing.QueryTracer())
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := waitForDatabase(ctx, pool, log); err != nil {
		return err
	}
	if cfg.MigrateOnStart {
		if err := database.Migrate(ctx, pool); err != nil {
			return err
		}
		if cfg.Citus {
			if err := database.Distribute(ctx, pool, log); err != nil {
				return err
			}
		}
	}
	// The webhook and SSF push workers and their River clients get a pool
	// of their own, so that under load deliveries do not queue for
	// connections behind API requests and fall behind the changes that
	// cause them. Events and SETs are still inserted in the changing
	// request's transaction.
	hookPool, err := database.OpenTraced(ctx, cfg.DatabaseURL, webhookPoolSize, tracing.QueryTracer())
	if err != nil {
		return err
	}
	defer hookPool.Close()

	// Modules, each built from its explicit dependencies; their metrics and
	// the depth of River's queues go to one registry.
	registry := prometheus.NewRegistry()
	registry.MustRegister(jobmetrics.Queues(pool, log), web.PoolCollector("webhooks", hookPool))
	env := wiring.Env{Config: cfg, Pool: pool, WebhookPool: hookPool, Log: log, Registry: registry, Tracing: tracing}
	ident, err := wiring.NewIdentity(env)
	if err != nil {
		return err
	}
	if err := ident.Keys.Prepare(ctx); err != nil {
		return err
	}
	m, err := wiring.NewModules(env, ident)
	if err != nil {
		return err
	}
	// The token endpoint issues consent tokens of the flows module's flows.
	consentTokens, err := wiring.NewConsentTokens(env, ident, m)
	if err != nil {
		return err
	}

	// Staff accounts, the built-in provider's interactive sign-in
	// (authorization code + PKCE, test eID), and the relying parties of the
	// console and the consent pages. ID tokens are signed with the identity
	// module's rotating keys, so one JWKS verifies everything.
	accounts, err := staff.NewAccounts(pool, ident.Orgs, staff.Config{PasswordParams: cfg.PasswordHash})
	if err != nil {
		return err
	}
	provider, err := login.New(pool, ident.Keys, accounts, login.Config{
		Issuer: cfg.BaseURL.String(), Clients: login.BuiltInClients(cfg.BaseURL.String(), cfg.SessionKey),
		TestEID: cfg.TestEID, TestEIDLevels: web.TestEIDLevels(cfg.ConsentACRMap), NationalIDClaim: cfg.ConsentNationalIDClaim,
		OrgClaim: cfg.ConsoleOrgClaim, RolesClaim: cfg.ConsoleRolesClaim, DataKey: cfg.DataKey,
	})
	if err != nil {
		return err
	}
	// The records of sessions, so that the server can end them; every
	// instance reads them, so an end holds everywhere at once.
	sessions, err := staff.NewSessions(pool, staff.SessionsConfig{Log: log})
	if err != nil {
		return err
	}
	srv, err := web.New(web.Deps{
		Log: log, Config: cfg, Pool: pool, Registry: registry, Webhooks: m.Webhooks,
		Tokens: consentTokens, Bearer: ident.Tokens, JWKS: ident.Keys, Organizations: ident.Orgs, Clients: ident.Orgs,
		Audit: ident.Audit, Limits: ident.Limits,
		Endpoints: m.Endpoints, Flows: m.Flows, Definitions: m.Definitions, Resources: m.Resources, Records: m.Records, SSF: m.SSF,
		Receipts: m.Receipts, Notices: wiring.NamedNotices{Notices: m.SSF, Names: m.Directory}, Streams: m.SSF,
		Consent: m.Journey, PersonPage: m.Journey, Withdrawals: m.Withdrawals,
		Login: provider, Sessions: sessions, Idempotency: m.Answers, Tracing: tracing, Erasures: m.Erasures,
	})
	if err != nil {
		return err
	}
	runners := []runner{
		{"identity changes", ident.Feed.Run},
		{"identity token sweep", ident.Tokens.Run},
		{"API rate limits", ident.Limits.Run},
		{"flows maintenance", m.Flows.Run},
		{"idempotency maintenance", m.Answers.Run},
		{"consent expiry", m.Flows.RunExpiry},
		{"webhook workers", m.Webhooks.Run},
		{"ssf push workers", m.SSF.Run},
		{"session sweep", sessions.Run},
	}

	// The listeners open last, once nothing else can fail.
	if cfg.PprofAddr != "" {
		pprofListener, err := listen(ctx, cfg.PprofAddr)
		if err != nil {
			return fmt.Errorf("FLOWD_PPROF_ADDR: %w", err)
		}
		defer pprofListener.Close()
		runners = append(runners, runner{"pprof", servePprof(pprofListener, log)})
	}
	if cfg.OpsAddr != "" {
		opsListener, err := listen(ctx, cfg.OpsAddr)
		if err != nil {
			return fmt.Errorf("FLOWD_OPS_ADDR: %w", err)
		}
		defer opsListener.Close()
		runners = append(runners, runner{"operations listener", serveOps(opsListener, srv.Ops(), log)})
	}
	ln, err := listen(ctx, cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	log.Info("serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL.String())
	fmt.Fprintf(sys.Stdout, "flowd is serving on %s\n  API        %s/api/flows\n  API docs   %s/docs\n  console    %s/console\n  readiness  %s/readyz\n",
		ln.Addr(), cfg.BaseURL, cfg.BaseURL, cfg.BaseURL, cfg.BaseURL)
	return serveWith(ctx, log, srv, ln, runners...)
}

// runner is work that runs beside the HTTP server until its context ends,
// then returns: a module's Run, the webhook workers, the profiler.
type runner struct {
	name string
	run  func(context.Context) error
}

// server is what serveWith serves: web.Server, which drains its requests
// before Serve returns.
type server interface {
	Serve(ctx context.Context, ln net.Listener) error
}

// serveWith serves srv on ln with the runners beside it until ctx ends or a
// runner fails (returns before it is told to stop), which ends serving and
// is the error returned. The runners are told to stop only once the server
// has drained, so that work its last requests caused (a webhook delivery)
// is still done here, and serveWith returns only after every runner has.
// An error a runner returns while it stops is logged.
func serveWith(ctx context.Context, log *slog.Logger, srv server, ln net.Listener, runners ...runner) error {
	serving, stopServing := context.WithCancel(ctx)
	defer stopServing()
	running, stopRunning := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRunning()

	var (
		failure  error
		failOnce sync.Once
		runs     sync.WaitGroup
	)
	for _, r := range runners {
		runs.Go(func() {
			err := r.run(running)
			switch {
			case running.Err() == nil:
				if err == nil {
					err = errors.New("returned before it was told to stop")
				}
				failOnce.Do(func() { failure = fmt.Errorf("%s: %w", r.name, err) })
				stopServing()
			case err != nil:
				log.WarnContext(ctx, r.name+" did not stop cleanly", "error", err.Error())
			}
		})
	}
	err := srv.Serve(serving, ln)
	stopRunning()
	runs.Wait()
	return errors.Join(failure, err)
}

// listen opens a TCP listener on addr.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// webhookPoolSize bounds the webhook and SSF push workers' own pool: their
// River clients' fetches, completions and LISTEN connections, and each
// delivery's few short statements. Workers spend most of their time waiting
// for receivers.
const webhookPoolSize = 12

// waitForDatabase waits up to a minute for a database that is still starting,
// as it is when flowd and PostgreSQL start together.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := pool.Ping(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !database.IsUnavailable(err) {
			return fmt.Errorf("database: %w", err)
		}
		log.InfoContext(ctx, "waiting for the database", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}
