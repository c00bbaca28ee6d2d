package web

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// render writes a templ component as an HTML page with status.
func (s *Server) render(c echo.Context, status int, page templ.Component) error {
	var buf bytes.Buffer
	if err := page.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// writeJSON encodes v as the JSON body of a response with status.
func (s *Server) writeJSON(c echo.Context, status int, v any) error {
	return writeJSONType(c, status, echo.MIMEApplicationJSON, v)
}

// writeProblem writes an RFC 9457 problem body.
func (s *Server) writeProblem(c echo.Context, status int, p Problem) error {
	return writeJSONType(c, status, "application/problem+json", p)
}

func writeJSONType(c echo.Context, status int, contentType string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, contentType)
	c.Response().WriteHeader(status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err = c.Response().Write(append(b, '\n'))
	return err
}
