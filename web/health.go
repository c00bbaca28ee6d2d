package web

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/version"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// readiness is what /readyz knows without asking the database.
type readiness struct {
	// migrationsCurrent remembers that migrations were found current: a
	// running binary's migrations do not change.
	migrationsCurrent atomic.Bool
	// draining is set once the server is shutting down (see Serve).
	draining atomic.Bool
	// drainDelay is the timer of the shutdown delay: time.After when nil;
	// a test ends the delay when it has seen the drain.
	drainDelay func(time.Duration) <-chan time.Time
}

// handleHealthz handles "GET /healthz": the process is up, and which build
// it runs.
func (s *Server) handleHealthz(c echo.Context) error {
	return httpkit.WriteJSON(c, http.StatusOK, map[string]string{"status": "ok", "version": version.Get().Version})
}

// handleReadyz handles "GET /readyz": the instance is not shutting down, and
// the database answers and its schema is current, so it can take traffic.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.ready.draining.Load() {
		return httpkit.WriteJSON(c, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "migrations": "ok"}
	ready := true
	if err := s.pool.Ping(ctx); err != nil {
		checks["database"] = "unreachable"
		checks["migrations"] = "unknown"
		ready = false
	} else if !s.ready.migrationsCurrent.Load() {
		current, err := database.MigrationsCurrent(ctx, s.pool)
		switch {
		case err != nil:
			checks["migrations"] = "unknown"
			ready = false
		case !current:
			checks["migrations"] = "pending"
			ready = false
		default:
			s.ready.migrationsCurrent.Store(true)
		}
	}
	if !ready {
		c.Response().Header().Set("Retry-After", "5")
		return httpkit.WriteJSON(c, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "checks": checks})
	}
	return httpkit.WriteJSON(c, http.StatusOK, map[string]any{"status": "ok", "checks": checks})
}
