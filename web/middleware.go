package web

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/flowd/flowd/internal/telemetry"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// requestID gives every request an id, taken from a well-formed X-Request-Id
// header or made up, echoed in the response and, carried in the request's
// context, written in every log line the request causes (the modules' too).
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		httpkit.SetRequestID(c, id)
		c.SetRequest(c.Request().WithContext(telemetry.WithRequestID(c.Request().Context(), id)))
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// observe logs every request and counts it in the metrics. It logs the route
// pattern, never the raw path or query: paths may hold consent tokens.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // write the response now so its status is known
		}
		elapsed := time.Since(start)
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		s.metrics.observe(c.Request().Context(), c.Request().Method, route, status, elapsed)
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if route == "/healthz" || route == "/readyz" || route == "/metrics" || route == "/assets/*" {
			level = slog.LevelDebug
		}
		if !s.log.Enabled(c.Request().Context(), level) {
			return nil // spares the attributes' allocation on every request
		}
		s.log.LogAttrs(c.Request().Context(), level, "request",
			slog.String("method", c.Request().Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int64("bytes", c.Response().Size),
		)
		return nil
	}
}

// recoverPanics turns a panic into a logged internal error instead of a dropped connection.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(r)
				}
				s.log.ErrorContext(c.Request().Context(), "panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// contentSecurityPolicy allows only our own scripts, styles and images; no
// inline script, no framing. form-action is left open on purpose: a consent
// decision ends in a redirect to the organization's site, which browsers
// check against form-action.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	set := securityHeaderValues
	if s.cfg.Secure() {
		set = append(slices.Clip(set), headerValue{"Strict-Transport-Security", []string{"max-age=31536000"}})
	}
	return func(c echo.Context) error {
		h := c.Response().Header()
		for _, v := range set {
			h[v.key] = v.values
		}
		return next(c)
	}
}

// headerValue is a response header, its key in canonical form.
type headerValue struct {
	key    string
	values []string
}

// securityHeaderValues go on every response. Each response shares their
// value slices, which spares six allocations a request: Header.Set, Add and
// Del replace or grow a value slice and never write into it.
var securityHeaderValues = []headerValue{
	{"Content-Security-Policy", []string{contentSecurityPolicy}},
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"Referrer-Policy", []string{"no-referrer"}},
	{"X-Frame-Options", []string{"DENY"}},
	{"Cross-Origin-Opener-Policy", []string{"same-origin"}},
	{"Permissions-Policy", []string{"camera=(), microphone=(), geolocation=()"}},
}

// Request body limits. A consent definition's two purposes of 10 000
// characters each may take 80 KB of UTF-8, with room for the rest.
const (
	bodyLimit           = 64 << 10
	definitionBodyLimit = 256 << 10
)

// definitionPaths take definitionBodyLimit instead of bodyLimit.
var definitionPaths = []string{"/api/flow-definitions", "/console/definitions"}

// limitBody refuses request bodies over bodyLimit bytes with 413, and those
// to definitionPaths over definitionBodyLimit.
func (s *Server) limitBody() echo.MiddlewareFunc {
	isDefinition := func(c echo.Context) bool {
		for _, p := range definitionPaths {
			if strings.HasPrefix(c.Request().URL.Path, p) {
				return true
			}
		}
		return false
	}
	small := middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Skipper: isDefinition, Limit: strconv.Itoa(bodyLimit) + "B"})
	large := middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Skipper: func(c echo.Context) bool { return !isDefinition(c) },
		Limit: strconv.Itoa(definitionBodyLimit) + "B"})
	return func(next echo.HandlerFunc) echo.HandlerFunc { return small(large(next)) }
}

// handlePublicPreflight answers the CORS preflight of a public document
// ("OPTIONS /api/openapi.json"): any origin may read it, with any header,
// since nothing is sent with credentials. The API grants no origin: its
// callers are servers holding client secrets, not pages in a browser.
func handlePublicPreflight(c echo.Context) error {
	h := c.Response().Header()
	h.Set(echo.HeaderAllow, "GET, OPTIONS")
	h.Set(echo.HeaderAccessControlAllowOrigin, "*")
	h.Set(echo.HeaderAccessControlAllowMethods, "GET")
	h.Set(echo.HeaderAccessControlAllowHeaders, "*")
	h.Set(echo.HeaderAccessControlMaxAge, "86400")
	return c.NoContent(http.StatusNoContent)
}

// filesOnly is a file system whose directories cannot be opened, so that
// http.FileServer answers 404 for them instead of listing what they hold.
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := file.Stat(); err != nil || st.IsDir() {
		_ = file.Close()
		return nil, fs.ErrNotExist
	}
	return file, nil
}

// cacheAssets lets browsers keep embedded assets for an hour.
func cacheAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}
