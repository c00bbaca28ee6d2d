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

	// Static assets, embedded in the binary.
	static, _ := fs.Sub(assets.FS, ".")
	e.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/assets/", cacheAssets(http.FileServer(http.FS(static))))))
}
