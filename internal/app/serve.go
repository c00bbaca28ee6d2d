package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web"
)

// runServe handles "flowd serve": it migrates (unless told not to), then
// serves until ctx ends, draining in-flight requests before it returns.
func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen address (default FLOWD_ADDR or :8080)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	cfg, err := config.Load(getenv, config.Need{Database: true, Secrets: true})
	if err != nil {
		return err
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	log := newLogger(stderr, cfg.LogLevel)
	tuneGC(getenv)
	if cfg.PprofAddr != "" {
		if err := servePprof(ctx, cfg.PprofAddr, log); err != nil {
			return fmt.Errorf("FLOWD_PPROF_ADDR: %w", err)
		}
	}

	pool, err := database.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
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
	}

	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	// Modules, each built from its explicit dependencies.
	// identity (issue 3):
	ident := identity.New(pool, identityConfig(cfg, log))
	if err := ident.Prepare(ctx); err != nil {
		ln.Close()
		return err
	}
	background, stopBackground := context.WithCancel(ctx)
	var backgroundDone sync.WaitGroup
	defer backgroundDone.Wait()
	defer stopBackground()
	backgroundDone.Go(func() { _ = ident.Run(background) })

	orgs := organizationDirectory{ident}

	// login (issue 6): staff accounts, the built-in provider's interactive
	// sign-in (authorization code + PKCE, test eID), and the relying parties
	// of the console and the consent pages. ID tokens are signed with the
	// identity module's rotating keys, so one JWKS verifies everything.
	staff, err := login.NewStaff(pool, orgs, login.StaffConfig{})
	if err != nil {
		return err
	}
	provider, err := login.New(pool, ident, staff, login.Config{
		Issuer: cfg.BaseURL.String(), Clients: login.BuiltInClients(cfg.BaseURL.String(), cfg.SessionKey),
		TestEID: cfg.TestEID, NationalIDClaim: cfg.ConsentNationalIDClaim,
		OrgClaim: cfg.ConsoleOrgClaim, RolesClaim: cfg.ConsoleRolesClaim, DataKey: cfg.DataKey,
	})
	if err != nil {
		return err
	}
	consoleRP := oidclogin.New(oidclogin.ConsoleConfig(cfg))
	consentRP := oidclogin.New(oidclogin.ConsentConfig(cfg))

	// webhooks (issue 5): the delivery workers and River get a pool of their
	// own, so that under load deliveries do not queue for connections behind
	// API requests and fall behind the creates that cause them. Events are
	// still inserted in the creating request's transaction.
	hookPool, err := database.Open(ctx, cfg.DatabaseURL, webhookPoolSize)
	if err != nil {
		ln.Close()
		return err
	}
	defer hookPool.Close()
	registry := prometheus.NewRegistry()
	hooks, err := webhooks.New(hookPool, flows.NewTaskReports(hookPool), webhooks.Options{
		Timeout: cfg.WebhookTimeout, AllowPrivate: cfg.WebhookAllowPrivate, KeyEncryptionKey: cfg.KeyEncryptionKey,
		Schedule: cfg.WebhookRetrySchedule, Log: log, Registry: registry,
	})
	if err != nil {
		return err
	}

	// consent (issue 7; the request rows of issue 4):
	sealer, err := pii.New(cfg.DataKey, cfg.DataKeyPrevious...)
	if err != nil {
		return err
	}
	consentRequests := consent.NewRequests(pool, sealer, cfg.BaseURL.String())

	// flows (issue 4): events go out through the webhooks module, which
	// reports its delivery tasks back to flows.
	flowsModule := flows.New(pool, sealer, consentRequests, orgs, hooks, log, registry, flows.Config{
		NationalIDFormat: cfg.NationalIDFormat, AllowInsecureURLs: cfg.AllowInsecureURLs, ConsentTTL: cfg.ConsentTTL,
		ReadRoundTrips: cfg.DBReadRoundTrips,
	})
	backgroundDone.Go(func() { _ = flowsModule.Run(background) })

	srv := web.New(web.Deps{
		Log: log, Config: cfg, Pool: pool, Registry: registry, Identity: ident, Webhooks: hooks,
		Flows: flowsModule, Consent: consent.NewJourney(pool, consentRequests, flowsModule, orgs, orgs, log),
		Login: provider, ConsoleRP: consoleRP, ConsentRP: consentRP,
	})
	// The webhook workers run with the server and stop after it has drained,
	// so that a request's last event is still delivered by someone: this
	// instance if it can finish within the workers' drain timeout, another
	// (or the next) otherwise. Workers that cannot start stop the server.
	serving, stopServing := context.WithCancel(ctx)
	defer stopServing()
	workers, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	workersDone := make(chan error, 1)
	go func() {
		err := hooks.Run(workers)
		stopServing()
		workersDone <- err
	}()
	log.Info("serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL.String())
	fmt.Fprintf(stdout, "flowd is serving on %s\n  API        %s/api/flows\n  API docs   %s/docs\n  console    %s/console\n  readiness  %s/readyz\n",
		ln.Addr(), cfg.BaseURL, cfg.BaseURL, cfg.BaseURL, cfg.BaseURL)
	err = srv.Serve(serving, ln, cfg.ShutdownTimeout)
	stopWorkers()
	return errors.Join(err, <-workersDone)
}

// webhookPoolSize bounds the webhook workers' own pool: River's fetches,
// completions and its LISTEN connection, and each delivery's three short
// statements. Workers spend most of their time waiting for receivers.
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
		log.Info("waiting for the database", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}
