package web

import (
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/assets"
)

// routes lists every route of flowd, grouped by who may call it.
func (s *Server) routes() {
	e := s.echo
	e.Use(s.requestID, s.observe, s.recoverPanics, s.securityHeaders, s.limitBody(64<<10))

	// Operations: anyone who can reach the port.
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler))

	// The built-in OAuth 2.0 provider: public, client authentication in the handlers.
	e.POST("/oauth/token", s.handleToken)
	e.GET("/oauth/jwks", s.handleJWKS)
	e.GET("/.well-known/openid-configuration", s.handleDiscovery)
	e.GET("/.well-known/oauth-authorization-server", s.handleDiscovery)

	// The API: bearer token, organization from the token, scopes per route.
	api := e.Group("/api", s.authenticate)
	_ = api
	// (issue 4: /api/flows, /api/tasks)

	// API documentation: public.
	// (issue 4: /api/openapi.json, /docs)

	// Consent pages: the end user, by link.
	// (issue 7)

	// Console: organization staff, by session.
	// (issue 8)

	// Static assets, embedded in the binary.
	static, _ := fs.Sub(assets.FS, ".")
	e.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/assets/", cacheAssets(http.FileServer(http.FS(static))))))
}
