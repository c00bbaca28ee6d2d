package httpkit

import (
	"context"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
)

const principalKey = "principal"

// Tokens verifies the API's access tokens: bearer tokens, and DPoP-bound
// ones with their proof, whose server nonce it gives.
type Tokens interface {
	VerifyAccessToken(ctx context.Context, raw string) (identity.Principal, error)
	VerifyDPoPAccessToken(ctx context.Context, raw string, req tokens.DPoPRequest) (identity.Principal, error)
	DPoPNonce() string
}

// Authenticate admits API requests that carry a valid bearer token, or a
// DPoP-bound token with its proof (RFC 9449 7), and puts the verified
// Principal where Principal finds it. No handler parses tokens. Every
// request it admits then counts against its client's rate limit (limitRate).
func Authenticate(tokens Tokens, limits orgs.APILimits) echo.MiddlewareFunc {
	rl := &rateLimiter{limits: limits}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		next = rl.limitRate(next)
		return func(c echo.Context) error {
			var (
				p   identity.Principal
				err error
			)
			header := c.Request().Header.Get(echo.HeaderAuthorization)
			if raw, ok := BearerToken(header); ok {
				p, err = tokens.VerifyAccessToken(c.Request().Context(), raw)
			} else if raw, ok := dpopToken(header); ok {
				SetDPoPNonce(c, tokens)
				p, err = tokens.VerifyDPoPAccessToken(c.Request().Context(), raw, DPoPRequest(c.Request()))
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
}

// RequireScope refuses callers whose token lacks scope with 403 insufficient_scope.
func RequireScope(scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !Principal(c).HasScope(scope) {
				return &apperr.Error{Code: apperr.InsufficientScope, Scope: scope,
					Message: "The token lacks the scope " + scope + "."}
			}
			return next(c)
		}
	}
}

// Principal returns the verified caller of an authenticated request.
func Principal(c echo.Context) identity.Principal {
	p, _ := c.Get(principalKey).(identity.Principal)
	return p
}

// BearerChallenge is the WWW-Authenticate value of an API request refused
// with err (RFC 6750 §3). A request without a bearer token (no credentials,
// or another scheme's) learns only the scheme and realm: §3.1 keeps error
// codes for requests that tried one.
func BearerChallenge(c echo.Context, err *apperr.Error) string {
	const challenge = `Bearer realm="flowd"`
	if err.Code == apperr.InsufficientScope {
		return challenge + `, error="insufficient_scope", scope="` + err.Scope + `"`
	}
	if _, ok := BearerToken(c.Request().Header.Get(echo.HeaderAuthorization)); ok {
		return challenge + `, error="invalid_token"`
	}
	return challenge
}

// BearerToken returns the token of an Authorization header of the Bearer
// scheme, and false when the header holds none.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
