package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

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
	buf, err := encodeJSON(v)
	if err != nil {
		return err
	}
	defer putJSONBuffer(buf)
	return writeBody(c, status, contentType, buf.Bytes())
}

// encodeJSON encodes v into a buffer of jsonBuffers, which the caller puts
// back with putJSONBuffer once it has written the bytes.
func encodeJSON(v any) (*bytes.Buffer, error) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	// Encode writes what json.Marshal would, HTML-escaped as well, plus the
	// trailing newline; encoding into a reused buffer spares a response's
	// allocations and the copy that appending the newline made.
	if a, ok := v.(jsonAppender); ok {
		buf.Write(a.appendJSON(buf.AvailableBuffer()))
	} else if err := json.NewEncoder(buf).Encode(v); err != nil {
		putJSONBuffer(buf)
		return nil, err
	}
	return buf, nil
}

// writeBody writes body as the response with status and contentType.
func writeBody(c echo.Context, status int, contentType string, body []byte) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, contentType)
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	c.Response().WriteHeader(status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := c.Response().Write(body)
	return err
}

// jsonBuffers holds the buffers JSON responses are encoded into.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledJSONBuffer bounds the buffers kept for reuse, so that one large
// response does not stay in memory for good.
const maxPooledJSONBuffer = 64 << 10

func putJSONBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledJSONBuffer {
		return
	}
	buf.Reset()
	jsonBuffers.Put(buf)
}
