package httpkit

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity/tokens"
)

// dpopChallengeBase opens every DPoP challenge (RFC 9449 7.1): the scheme
// and the proof algorithms flowd accepts.
var dpopChallengeBase = `DPoP algs="` + strings.Join(tokens.DPoPAlgorithmNames, " ") + `"`

// dpopToken returns the token of an Authorization header of the DPoP
// scheme, and false when the header holds none.
func dpopToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "DPoP") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// DPoPRequest is what the identity module checks a request's DPoP proof
// against. The proof's htu is compared with FLOWD_BASE_URL and this path,
// never with the Host header.
func DPoPRequest(r *http.Request) tokens.DPoPRequest {
	return tokens.NewDPoPRequest(r.Header.Values("DPoP"), r.Method, r.URL.EscapedPath())
}

// SetDPoPNonce sends the current server nonce (RFC 9449 8 and 9) to a
// request that uses DPoP, when FLOWD_DPOP_NONCE requires one: on success as
// the next nonce to use, on use_dpop_nonce as the one to retry with.
func SetDPoPNonce(c echo.Context, nonces interface{ DPoPNonce() string }) {
	if nonce := nonces.DPoPNonce(); nonce != "" {
		c.Response().Header().Set("DPoP-Nonce", nonce)
	}
}

// SetChallenges sets WWW-Authenticate on an API request refused with err,
// in the scheme the request used: Bearer (RFC 6750 3) or DPoP (RFC 9449
// 7.1). A request that used neither learns both schemes, without error
// codes, which RFC 6750 3.1 keeps for requests that tried one.
func SetChallenges(c echo.Context, err *apperr.Error) {
	h := c.Response().Header()
	header := c.Request().Header.Get(echo.HeaderAuthorization)
	if _, ok := dpopToken(header); ok {
		h.Set("WWW-Authenticate", dpopChallenge(err))
		return
	}
	if _, ok := BearerToken(header); ok || err.Code == apperr.InsufficientScope {
		h.Set("WWW-Authenticate", BearerChallenge(c, err))
		return
	}
	h.Set("WWW-Authenticate", `Bearer realm="flowd"`)
	h.Add("WWW-Authenticate", dpopChallengeBase)
}

// dpopChallenge is the DPoP challenge of a request that sent a DPoP-scheme
// token: insufficient_scope, the proof's error (invalid_dpop_proof or
// use_dpop_nonce), else invalid_token.
func dpopChallenge(err *apperr.Error) string {
	if err.Code == apperr.InsufficientScope {
		return dpopChallengeBase + `, error="insufficient_scope", scope="` + err.Scope + `"`
	}
	code := "invalid_token"
	var de *tokens.DPoPError
	if errors.As(err, &de) {
		code = de.Code
	}
	return dpopChallengeBase + `, error="` + code + `", error_description="` + quotable(err.Message) + `"`
}

// quotable keeps a message within an HTTP quoted-string without escapes.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
}
