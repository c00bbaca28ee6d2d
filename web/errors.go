package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// problemKinds maps each error code to its status and title. Each code's
// problem type is documented under its own heading on /docs (ProblemType).
var problemKinds = map[apperr.Code]struct {
	status int
	title  string
}{
	apperr.Invalid:              {http.StatusBadRequest, "Invalid request"},
	apperr.Unprocessable:        {http.StatusUnprocessableEntity, "Unprocessable request"},
	apperr.NotFound:             {http.StatusNotFound, "Not found"},
	apperr.Conflict:             {http.StatusConflict, "Conflict"},
	apperr.ConsentNotInForce:    {http.StatusConflict, "Consent not in force"},
	apperr.Unauthenticated:      {http.StatusUnauthorized, "Unauthenticated"},
	apperr.Forbidden:            {http.StatusForbidden, "Forbidden"},
	apperr.InsufficientScope:    {http.StatusForbidden, "Insufficient scope"},
	apperr.UnsupportedMediaType: {http.StatusUnsupportedMediaType, "Unsupported media type"},
	apperr.TooLarge:             {http.StatusRequestEntityTooLarge, "Request body too large"},
	apperr.IdempotencyMismatch:  {http.StatusUnprocessableEntity, "Idempotency key reused with a different request"},
	apperr.PreconditionFailed:   {http.StatusPreconditionFailed, "Precondition failed"},
	apperr.RateLimited:          {http.StatusTooManyRequests, "Too many requests"},
	apperr.Unavailable:          {http.StatusServiceUnavailable, "Service unavailable"},
	apperr.MethodNotAllowed:     {http.StatusMethodNotAllowed, "Method not allowed"},
	apperr.Internal:             {http.StatusInternalServerError, "Internal server error"},
}

// ProblemType returns the type URI of a code's problems:
// {baseURL}/docs#problem-<code>. RFC 9457 asks for an absolute URI that, when
// dereferenced, documents the problem; this one opens the problem's section
// of the API reference of the same service.
func ProblemType(baseURL string, code apperr.Code) string {
	return strings.TrimSuffix(baseURL, "/") + "/docs#problem-" + string(code)
}

// handleError is echo's one error handler: it turns any error a handler
// returns into a problem+json body for API callers or an error page for
// browsers, and logs what the caller must not see.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	appErr := s.toAppError(err, c)
	kind := problemKinds[appErr.Code]
	h := c.Response().Header()
	switch appErr.Code {
	case apperr.Unauthenticated:
		if isAPI(c) {
			httpkit.SetChallenges(c, appErr)
		}
	case apperr.InsufficientScope:
		httpkit.SetChallenges(c, appErr)
	case apperr.Unavailable:
		if appErr.RetryAfter == 0 {
			appErr.RetryAfter = 5 * time.Second
		}
	}
	if appErr.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(appErr.RetryAfter.Round(time.Second)/time.Second)))
	}
	if appErr.Code == apperr.Internal || appErr.Code == apperr.Unavailable {
		s.log.ErrorContext(c.Request().Context(), "request failed", "route", c.Path(), "code", string(appErr.Code), "error", err.Error())
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(kind.status)
	} else if !isAPI(c) && acceptsHTML(c) {
		page := pages.ErrorPage{Status: kind.status, Title: kind.title, Message: appErr.Message, RequestID: httpkit.RequestID(c)}
		if strings.HasPrefix(c.Request().URL.Path, "/console/") {
			page.BackURL, page.BackText = "/console/flows", "Back to the console"
		}
		werr = httpkit.Render(c, kind.status, pages.Error(page))
	} else {
		werr = httpkit.WriteProblem(c, kind.status, httpkit.Problem{
			Type: ProblemType(s.cfg.BaseURL.String(), appErr.Code), Title: kind.title, Status: kind.status,
			Detail: appErr.Message, Errors: appErr.Fields,
		})
	}
	if werr != nil {
		s.log.WarnContext(c.Request().Context(), "writing error response", "error", werr.Error())
	}
}

// toAppError gives any error an application code and a message safe to show.
func (s *Server) toAppError(err error, c echo.Context) *apperr.Error {
	if e, ok := apperr.As(err); ok {
		if e.Code == apperr.Internal {
			return &apperr.Error{Code: apperr.Internal, Message: internalMessage(c), Err: err}
		}
		return e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return apperr.New(apperr.NotFound, "No resource at this address.")
		case http.StatusMethodNotAllowed:
			return apperr.New(apperr.MethodNotAllowed, "This address does not accept %s.", c.Request().Method)
		case http.StatusRequestEntityTooLarge:
			return apperr.New(apperr.TooLarge, "The request body is too large: 64 KiB at most, 256 KiB for a consent definition.")
		case http.StatusUnsupportedMediaType:
			return apperr.New(apperr.UnsupportedMediaType, "The request body must be application/json.")
		case http.StatusBadRequest:
			return apperr.New(apperr.Invalid, "The request is malformed.")
		case http.StatusUnauthorized:
			return apperr.New(apperr.Unauthenticated, "Authentication is required.")
		case http.StatusForbidden:
			return apperr.New(apperr.Forbidden, "You may not do this.")
		case http.StatusTooManyRequests:
			return apperr.New(apperr.RateLimited, "Too many requests; slow down.")
		case http.StatusServiceUnavailable:
			return apperr.New(apperr.Unavailable, "The service is temporarily unavailable. Try again shortly.")
		}
	}
	if database.IsUnavailable(err) {
		return apperr.Wrap(err, apperr.Unavailable, "The service is temporarily unavailable. Try again shortly.")
	}
	return &apperr.Error{Code: apperr.Internal, Message: internalMessage(c), Err: err}
}

func internalMessage(c echo.Context) string {
	return "Something went wrong on our side. Quote request id " + httpkit.RequestID(c) + " if you contact support."
}

// isAPI reports whether the request is for the machine interface, which
// always answers problem+json.
func isAPI(c echo.Context) bool {
	p := c.Request().URL.Path
	return strings.HasPrefix(p, "/api/") || p == "/api" || strings.HasPrefix(p, "/oauth/") || strings.HasPrefix(p, "/ssf/")
}

func acceptsHTML(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html")
}
