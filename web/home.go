package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// handleHome handles "GET /": a small page that says where flowd's surfaces
// are, so that a newcomer's first request does not end in a 404.
func (s *Server) handleHome(c echo.Context) error {
	return httpkit.Render(c, http.StatusOK, pages.Home(pages.HomePage{TestEID: s.cfg.TestEID}))
}
