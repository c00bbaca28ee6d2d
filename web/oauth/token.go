package oauth

import (
	"encoding/base64"
	"encoding/json"
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
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/web/internal/httpkit"
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

// consentTokenResponse is the token endpoint's answer with a consent
// token (RFC 9396 7): no refresh token, no scope, and the
// authorization_details granted.
type consentTokenResponse struct {
	AccessToken          string          `json:"access_token"`
	ExpiresIn            int             `json:"expires_in"`
	TokenType            string          `json:"token_type"`
	AuthorizationDetails json.RawMessage `json:"authorization_details"`
}

// tokenErrorResponse is an RFC 6749 5.2 error body.
type tokenErrorResponse struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// HandleToken handles "POST /oauth/token". It answers in RFC 6749's words,
// not problem+json: OAuth clients parse {error, error_description}.
func (h *Handler) HandleToken(c echo.Context) error {
	noStore(c)
	req, form, terr := parseTokenRequest(c.Request())
	if terr != nil {
		return h.writeTokenError(c, terr)
	}
	if req.GrantType == "authorization_code" && h.login != nil {
		// The interactive login's code exchange; its built-in
		// clients are not API clients, so the provider authenticates them.
		return h.exchangeAuthorizationCode(c, form, req.ClientID, req.ClientSecret)
	}
	req.RemoteAddr = c.RealIP()
	if req.DPoP = httpkit.DPoPRequest(c.Request()); req.DPoP.Present() {
		httpkit.SetDPoPNonce(c, h.nonces)
	}
	tok, err := h.tokens.Token(c.Request().Context(), req)
	if err != nil {
		if errors.As(err, &terr) {
			return h.writeTokenError(c, terr)
		}
		return err
	}
	if tok.AuthorizationDetails != "" {
		return httpkit.WriteJSON(c, http.StatusOK, consentTokenResponse{AccessToken: tok.AccessToken, ExpiresIn: tok.ExpiresIn,
			TokenType: tok.TokenType, AuthorizationDetails: json.RawMessage(tok.AuthorizationDetails)})
	}
	return httpkit.WriteJSON(c, http.StatusOK, tokenResponse{
		AccessToken: tok.AccessToken, ExpiresIn: tok.ExpiresIn, RefreshToken: tok.RefreshToken,
		RefreshExpiresIn: tok.RefreshExpiresIn, TokenType: tok.TokenType, Scope: tok.Scope,
	})
}

// writeTokenError writes an RFC 6749 5.2 error with its status: 401 for
// invalid_client (with a Basic challenge when the client tried Basic), 429
// with Retry-After when the address failed costly checks too often, else 400.
func (h *Handler) writeTokenError(c echo.Context, e *tokens.TokenError) error {
	status := http.StatusBadRequest
	switch e.Code {
	case tokens.ErrCodeInvalidClient:
		status = http.StatusUnauthorized
		if e.AuthMethod == identity.AuthSecretBasic {
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="flowd", charset="UTF-8"`)
		}
	case tokens.ErrCodeSlowDown:
		status = http.StatusTooManyRequests
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	return httpkit.WriteJSON(c, status, tokenErrorResponse{Error: e.Code, ErrorDescription: e.Description})
}

// tokenParams are the token endpoint's parameters; any other is ignored, as
// RFC 6749 3.2 requires.
var tokenParams = append([]string{"grant_type", "client_id", "client_secret", "refresh_token", "scope",
	"authorization_details", "resource"}, assertionParams...)

// parseTokenRequest reads a token request (see parseClientForm).
func parseTokenRequest(r *http.Request) (tokens.TokenRequest, url.Values, *tokens.TokenError) {
	p, auth, form, terr := parseClientForm(r, tokenParams, "refresh_token")
	if terr != nil {
		return tokens.TokenRequest{}, nil, terr
	}
	return tokens.TokenRequest{ClientAuth: auth, GrantType: p["grant_type"], RefreshToken: p["refresh_token"], Scope: p["scope"],
		AuthorizationDetails: p["authorization_details"], Resource: p["resource"]}, form, nil
}

// clientTokenParams are the parameters of the revocation (RFC 7009 2.1) and
// introspection (RFC 7662 2.1) endpoints.
var clientTokenParams = append([]string{"token", "token_type_hint", "client_id", "client_secret"}, assertionParams...)

// assertionParams carry private_key_jwt's client assertion (RFC 7523 2.2).
var assertionParams = []string{"client_assertion_type", "client_assertion"}

// parseClientTokenRequest reads a request to the revocation or
// introspection endpoint (see parseClientForm).
func parseClientTokenRequest(r *http.Request) (tokens.ClientTokenRequest, *tokens.TokenError) {
	p, auth, _, terr := parseClientForm(r, clientTokenParams, "token")
	if terr != nil {
		return tokens.ClientTokenRequest{}, terr
	}
	return tokens.ClientTokenRequest{ClientAuth: auth, Token: p["token"], TokenTypeHint: p["token_type_hint"]}, nil
}

// parseClientForm reads a request to one of the provider's endpoints that
// authenticate API clients: an application/x-www-form-urlencoded body, each
// of params at most once (RFC 6749 3.2), and the client's credentials either
// in the body (client_secret_post) or in HTTP Basic (client_secret_basic,
// each part form-encoded as RFC 6749 2.3.1 says), never both; or a client
// assertion (private_key_jwt), which the identity module tells apart.
// Neither a client secret, an assertion nor the secret parameter may come
// in the URL. It returns the values of params, the client's authentication
// and the whole form.
func parseClientForm(r *http.Request, params []string, secret string) (map[string]string, tokens.ClientAuth, url.Values, *tokens.TokenError) {
	invalid := func(desc string) (map[string]string, tokens.ClientAuth, url.Values, *tokens.TokenError) {
		return nil, tokens.ClientAuth{}, nil, &tokens.TokenError{Code: tokens.ErrCodeInvalidRequest, Description: desc}
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/x-www-form-urlencoded" {
		return invalid("The request body must be application/x-www-form-urlencoded.")
	}
	q := r.URL.Query()
	if q.Has("client_secret") || q.Has("client_assertion") || q.Has(secret) {
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
	p := make(map[string]string, len(params))
	for _, name := range params {
		vs := form[name]
		if len(vs) > 1 {
			return invalid("The parameter " + name + " must not be repeated.")
		}
		if len(vs) == 1 {
			if !utf8.ValidString(vs[0]) || strings.ContainsRune(vs[0], 0) {
				return invalid("The parameter " + name + " is not valid UTF-8 text.")
			}
			p[name] = vs[0]
		}
	}
	auth := tokens.ClientAuth{ClientID: p["client_id"], ClientSecret: p["client_secret"], AuthMethod: identity.AuthSecretPost,
		ClientAssertionType: p["client_assertion_type"], ClientAssertion: p["client_assertion"]}
	if header := r.Header.Get("Authorization"); header != "" {
		id, sec, ok := parseBasic(header)
		if !ok {
			return nil, tokens.ClientAuth{}, nil, &tokens.TokenError{Code: tokens.ErrCodeInvalidClient, AuthMethod: identity.AuthSecretBasic,
				Description: "The Authorization header must be HTTP Basic with the form-encoded client_id and client_secret."}
		}
		if auth.ClientSecret != "" {
			return invalid("Use one client authentication method: HTTP Basic or client_secret in the body, not both.")
		}
		if auth.ClientID != "" && auth.ClientID != id {
			return invalid("client_id in the body differs from the one in HTTP Basic.")
		}
		auth = tokens.ClientAuth{ClientID: id, ClientSecret: sec, AuthMethod: identity.AuthSecretBasic,
			ClientAssertionType: auth.ClientAssertionType, ClientAssertion: auth.ClientAssertion}
	}
	return p, auth, form, nil
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

// HandleRevoke handles "POST /oauth/revoke" (RFC 7009): 200 with an empty
// body whether or not there was anything to revoke; errors as the token
// endpoint's.
func (h *Handler) HandleRevoke(c echo.Context) error {
	noStore(c)
	req, terr := parseClientTokenRequest(c.Request())
	if terr != nil {
		return h.writeTokenError(c, terr)
	}
	req.RemoteAddr = c.RealIP()
	if err := h.tokens.Revoke(c.Request().Context(), req); err != nil {
		if errors.As(err, &terr) {
			return h.writeTokenError(c, terr)
		}
		return err
	}
	return c.NoContent(http.StatusOK)
}

// introspectionResponse is the introspection endpoint's body (RFC 7662
// 2.2): only active when the token is not.
type introspectionResponse struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	TokenType string `json:"token_type,omitempty"`
	Expiry    int64  `json:"exp,omitempty"`
	IssuedAt  int64  `json:"iat,omitempty"`
	NotBefore int64  `json:"nbf,omitempty"`
	Subject   string `json:"sub,omitempty"`
	Audience  string `json:"aud,omitempty"`
	Issuer    string `json:"iss,omitempty"`
	JWTID     string `json:"jti,omitempty"`
	OrgID     string `json:"org_id,omitempty"`
	// Cnf binds a DPoP token to its key (RFC 9449 6.2).
	Cnf *introspectionCnf `json:"cnf,omitempty"`
	// AuthorizationDetails are a consent token's (RFC 9396 9.2).
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty"`
}

// introspectionCnf is the cnf member of an introspection answer.
type introspectionCnf struct {
	JKT string `json:"jkt"`
}

// HandleIntrospect handles "POST /oauth/introspect" (RFC 7662).
func (h *Handler) HandleIntrospect(c echo.Context) error {
	noStore(c)
	req, terr := parseClientTokenRequest(c.Request())
	if terr != nil {
		return h.writeTokenError(c, terr)
	}
	req.RemoteAddr = c.RealIP()
	in, err := h.tokens.Introspect(c.Request().Context(), req)
	if err != nil {
		if errors.As(err, &terr) {
			return h.writeTokenError(c, terr)
		}
		return err
	}
	out := introspectionResponse{Active: in.Active}
	if in.Active {
		out = introspectionResponse{Active: true, Scope: in.Scope, ClientID: in.ClientID, TokenType: in.TokenType,
			Expiry: in.Expiry.Unix(), IssuedAt: in.IssuedAt.Unix(), Subject: in.Subject, Audience: in.Audience,
			Issuer: in.Issuer, JWTID: in.JWTID, OrgID: in.OrganizationID}
		if !in.NotBefore.IsZero() {
			out.NotBefore = in.NotBefore.Unix()
		}
		if in.DPoPJKT != "" {
			out.Cnf = &introspectionCnf{JKT: in.DPoPJKT}
		}
		if in.AuthorizationDetails != "" {
			out.AuthorizationDetails = json.RawMessage(in.AuthorizationDetails)
		}
	}
	if !acceptsSignedIntrospection(c.Request().Header.Get("Accept")) {
		return httpkit.WriteJSON(c, http.StatusOK, out)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	signed, err := h.tokens.SignIntrospection(c.Request().Context(), in.Requester, body)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, signedIntrospectionType, []byte(signed))
}

// signedIntrospectionType is the media type of a signed introspection
// answer (RFC 9701 4).
const signedIntrospectionType = "application/token-introspection+jwt"

// acceptsSignedIntrospection reports whether an Accept header asks for a
// signed introspection answer: it names signedIntrospectionType with a
// quality above zero. JSON stays the answer to anything else.
func acceptsSignedIntrospection(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mediaType != signedIntrospectionType {
			continue
		}
		if q, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(q, 64); err != nil || v <= 0 {
				continue
			}
		}
		return true
	}
	return false
}

// HandleJWKS handles "GET /oauth/jwks": the public keys that verify access
// tokens, the current one and those retired while their tokens may live.
func (h *Handler) HandleJWKS(c echo.Context) error {
	set, err := h.jwks.JWKS(c.Request().Context())
	if err != nil {
		return err
	}
	// Short: a verifier that misses a new key id fetches again anyway.
	c.Response().Header().Set("Cache-Control", "public, max-age=60")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, set)
}

// HandleDiscovery handles "GET /.well-known/openid-configuration" and
// "GET /.well-known/oauth-authorization-server": the provider's metadata.
func (h *Handler) HandleDiscovery(c echo.Context) error {
	doc := mergeDiscovery(h.tokens.Discovery(), h.login.Discovery())
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return httpkit.WriteJSON(c, http.StatusOK, doc)
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
