package console

import (
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/web/internal/oidclogin"
)

// What the tests of console_test reach of the package's own.

// RequireStaffOf is RequireStaff on the console sessions of sessions, for a
// route a test mounts beside the console's.
func RequireStaffOf(sessions *oidclogin.Sessions) echo.MiddlewareFunc {
	return (&Handler{staffSessions: sessions}).RequireStaff
}
