package web

import (
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/identity"
)

// tokenResponse is the token endpoint's success body (RFC 6749 5.1 plus refresh_expires_in).
type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	ExpiresIn        int    `json:"expires_in"`
	RefreshToken     string `json:"refresh_token"`
	RefreshExpiresIn int    `json:"refresh_expires_in"`
	TokenType        string `json:"token_type"`
	Scope            string `json:"scope"`
}

// tokenErrorResponse is an RFC 6749 5.2 error body.
type tokenErrorResponse struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// handleToken handles "POST /oauth/token". It answers in RFC 6749's words,
// not problem+json: OAuth clients parse {error, error_description}.
func (s *Server) handleToken(c echo.Context) error {
	noStore(c)
	req, form, terr := parseTokenRequest(c.Request())
	if terr != nil {
		return s.writeTokenError(c, terr)
	}
	if req.GrantType == "authorization_code" && s.login != nil {
		// The interactive login's code exchange (issue 6); its built-in
		// clients are not API clients, so the provider authenticates them.
		return s.exchangeAuthorizationCode(c, form, req.ClientID, req.ClientSecret)
	}
	req.RemoteAddr = c.RealIP()
	tok, err := s.identity.Token(c.Request().Context(), req)
	if err != nil {
		if errors.As(err, &terr) {
			return s.writeTokenError(c, terr)
		}
		return err
	}
	return s.writeJSON(c, http.StatusOK, tokenResponse{
		AccessToken: tok.AccessToken, ExpiresIn: tok.ExpiresIn, RefreshToken: tok.RefreshToken,
		RefreshExpiresIn: tok.RefreshExpiresIn, TokenType: tok.TokenType, Scope: tok.Scope,
	})
}

// writeTokenError writes an RFC 6749 5.2 error with its status: 401 for
// invalid_client (with a Basic challenge when the client tried Basic), 429
// with Retry-After when the client or address failed too often, else 400.
func (s *Server) writeTokenError(c echo.Context, e *identity.TokenError) error {
	status := http.StatusBadRequest
	switch e.Code {
	case identity.ErrCodeInvalidClient:
		status = http.StatusUnauthorized
		if e.AuthMethod == identity.AuthSecretBasic {
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="flowd", charset="UTF-8"`)
		}
	case identity.ErrCodeSlowDown:
		status = http.StatusTooManyRequests
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	return s.writeJSON(c, status, tokenErrorResponse{Error: e.Code, ErrorDescription: e.Description})
}

// tokenParams are the token endpoint's parameters; any other is ignored, as
// RFC 6749 3.2 requires.
var tokenParams = []string{"grant_type", "client_id", "client_secret", "refresh_token", "scope"}

// parseTokenRequest reads a token request: an
// application/x-www-form-urlencoded body, each parameter at most once (RFC
// 6749 3.2), and the client's credentials either in the body
// (client_secret_post) or in HTTP Basic (client_secret_basic, each part
// form-encoded as RFC 6749 2.3.1 says), never both.
func parseTokenRequest(r *http.Request) (identity.TokenRequest, url.Values, *identity.TokenError) {
	invalid := func(desc string) (identity.TokenRequest, url.Values, *identity.TokenError) {
		return identity.TokenRequest{}, nil, &identity.TokenError{Code: identity.ErrCodeInvalidRequest, Description: desc}
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/x-www-form-urlencoded" {
		return invalid("The request body must be application/x-www-form-urlencoded.")
	}
	q := r.URL.Query()
	if q.Has("client_secret") || q.Has("refresh_token") {
		return invalid("Credentials must not be sent in the URL.")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return invalid("The request body could not be read.")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return invalid("The request body is not valid form encoding.")
	}
	var req identity.TokenRequest
	fields := map[string]*string{
		"grant_type": &req.GrantType, "client_id": &req.ClientID, "client_secret": &req.ClientSecret,
		"refresh_token": &req.RefreshToken, "scope": &req.Scope,
	}
	for _, name := range tokenParams {
		vs := form[name]
		if len(vs) > 1 {
			return invalid("The parameter " + name + " must not be repeated.")
		}
		if len(vs) == 1 {
			if !utf8.ValidString(vs[0]) || strings.ContainsRune(vs[0], 0) {
				return invalid("The parameter " + name + " is not valid UTF-8 text.")
			}
			*fields[name] = vs[0]
		}
	}
	req.AuthMethod = identity.AuthSecretPost
	if auth := r.Header.Get("Authorization"); auth != "" {
		id, secret, ok := parseBasic(auth)
		if !ok {
			return identity.TokenRequest{}, nil, &identity.TokenError{Code: identity.ErrCodeInvalidClient, AuthMethod: identity.AuthSecretBasic,
				Description: "The Authorization header must be HTTP Basic with the form-encoded client_id and client_secret."}
		}
		if req.ClientSecret != "" {
			return invalid("Use one client authentication method: HTTP Basic or client_secret in the body, not both.")
		}
		if req.ClientID != "" && req.ClientID != id {
			return invalid("client_id in the body differs from the one in HTTP Basic.")
		}
		req.ClientID, req.ClientSecret, req.AuthMethod = id, secret, identity.AuthSecretBasic
	}
	return req, form, nil
}

// parseBasic reads an HTTP Basic Authorization header whose user and
// password are form-encoded (RFC 6749 2.3.1).
func parseBasic(header string) (id, secret string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", false
	}
	u, p, found := strings.Cut(string(raw), ":")
	if !found {
		return "", "", false
	}
	if id, err = url.QueryUnescape(u); err != nil {
		return "", "", false
	}
	if secret, err = url.QueryUnescape(p); err != nil {
		return "", "", false
	}
	if !utf8.ValidString(id) || !utf8.ValidString(secret) {
		return "", "", false
	}
	return id, secret, id != ""
}

// handleJWKS handles "GET /oauth/jwks": the public keys that verify access
// tokens, the current one and those retired while their tokens may live.
func (s *Server) handleJWKS(c echo.Context) error {
	set, err := s.identity.JWKS(c.Request().Context())
	if err != nil {
		return err
	}
	// Short: a verifier that misses a new key id fetches again anyway.
	c.Response().Header().Set("Cache-Control", "public, max-age=60")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, set)
}

// handleDiscovery handles "GET /.well-known/openid-configuration" and
// "GET /.well-known/oauth-authorization-server": the provider's metadata.
func (s *Server) handleDiscovery(c echo.Context) error {
	doc := mergeDiscovery(s.identity.Discovery(), s.login.Discovery())
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return s.writeJSON(c, http.StatusOK, doc)
}

// mergeDiscovery lays the interactive login's metadata over the token
// endpoint's. A list both have becomes their union, base's values first:
// one provider serves both, so it supports the scopes, claims and grants of
// each. Any other field of over replaces base's.
func mergeDiscovery(base, over map[string]any) map[string]any {
	doc := make(map[string]any, len(base)+len(over))
	maps.Copy(doc, base)
	for k, v := range over {
		list, isList := v.([]string)
		baseList, baseIsList := doc[k].([]string)
		if !isList || !baseIsList {
			doc[k] = v
			continue
		}
		union := slices.Clone(baseList)
		for _, item := range list {
			if !slices.Contains(union, item) {
				union = append(union, item)
			}
		}
		doc[k] = union
	}
	return doc
}
