package web

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
)

const principalKey = "principal"

// authenticate admits API requests that carry a valid bearer token, or a
// DPoP-bound token with its proof (RFC 9449 7), and puts the verified
// Principal where principalOf finds it. No handler parses tokens. Every
// request it admits then counts against its client's rate limit (limitRate).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	next = s.limitRate(next)
	return func(c echo.Context) error {
		var (
			p   identity.Principal
			err error
		)
		header := c.Request().Header.Get(echo.HeaderAuthorization)
		if raw, ok := bearerToken(header); ok {
			p, err = s.bearer.VerifyAccessToken(c.Request().Context(), raw)
		} else if raw, ok := dpopToken(header); ok {
			s.setDPoPNonce(c)
			p, err = s.bearer.VerifyDPoPAccessToken(c.Request().Context(), raw, dpopRequest(c.Request()))
		} else {
			return apperr.New(apperr.Unauthenticated, "An access token is required, with the Bearer or the DPoP scheme.")
		}
		if err != nil {
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// requireScope refuses callers whose token lacks scope with 403 insufficient_scope.
func requireScope(scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !principalOf(c).HasScope(scope) {
				return &apperr.Error{Code: apperr.InsufficientScope, Scope: scope,
					Message: "The token lacks the scope " + scope + "."}
			}
			return next(c)
		}
	}
}

// principalOf returns the verified caller of an authenticated request.
func principalOf(c echo.Context) identity.Principal {
	p, _ := c.Get(principalKey).(identity.Principal)
	return p
}

// bearerChallenge is the WWW-Authenticate value of an API request refused
// with err (RFC 6750 §3). A request without a bearer token (no credentials,
// or another scheme's) learns only the scheme and realm: §3.1 keeps error
// codes for requests that tried one.
func bearerChallenge(c echo.Context, err *apperr.Error) string {
	const challenge = `Bearer realm="flowd"`
	if err.Code == apperr.InsufficientScope {
		return challenge + `, error="insufficient_scope", scope="` + err.Scope + `"`
	}
	if _, ok := bearerToken(c.Request().Header.Get(echo.HeaderAuthorization)); ok {
		return challenge + `, error="invalid_token"`
	}
	return challenge
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme, and false when the header holds none.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
