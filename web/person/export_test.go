package person

import (
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/web/internal/oidclogin"
)

// What the tests of person_test reach of the package's own.

// IdentityOf is the person the request's consent session, one of sessions,
// proved.
func IdentityOf(sessions *oidclogin.Sessions, c echo.Context) (ConsentIdentity, bool, error) {
	return (&Handler{sessions: sessions}).consentIdentityOf(c)
}
