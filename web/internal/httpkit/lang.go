package httpkit

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/views/i18n"
)

const langCookie = "flowd_lang"

// PublicLang picks the language of a page the public sees (the consent
// pages and the test eID): ?lang= (the switch, remembered in a cookie for
// the whole site so that the eID sign-in follows it), else the cookie, else
// Accept-Language. secure marks the cookie Secure.
func PublicLang(c echo.Context, secure bool) i18n.Lang {
	choice := c.QueryParam("lang")
	if choice != "" {
		lang := i18n.Negotiate(choice, "")
		c.SetCookie(&http.Cookie{Name: langCookie, Value: string(lang), Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	} else if ck, err := c.Cookie(langCookie); err == nil {
		choice = ck.Value
	}
	return i18n.Negotiate(choice, c.Request().Header.Get("Accept-Language"))
}
