package httpkit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/views/pages"
)

// Render writes a templ component as an HTML page with status.
func Render(c echo.Context, status int, page templ.Component) error {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer PutJSONBuffer(buf)
	if err := page.Render(c.Request().Context(), buf); err != nil {
		return err
	}
	return WriteBody(c, status, echo.MIMETextHTMLCharsetUTF8, buf.Bytes())
}

// RenderNotice renders a short page with a message and an optional link.
func RenderNotice(c echo.Context, status int, title, message, linkURL, linkText string) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, status, pages.Notice(pages.NoticePage{Status: status, Title: title, Message: message, LinkURL: linkURL, LinkText: linkText}))
}

// WriteJSON encodes v as the JSON body of a response with status.
func WriteJSON(c echo.Context, status int, v any) error {
	return writeJSONType(c, status, echo.MIMEApplicationJSON, v)
}

func writeJSONType(c echo.Context, status int, contentType string, v any) error {
	buf, err := EncodeJSON(v)
	if err != nil {
		return err
	}
	defer PutJSONBuffer(buf)
	return WriteBody(c, status, contentType, buf.Bytes())
}

// JSONAppender is a response body that writes its own JSON: exactly what
// encoding/json writes for it (HTML-escaped, one trailing newline), without
// reflection. Only the API's busiest bodies do (the list page and the flow
// envelope), where reflection and a string per instant cost a measurable
// share of the request (docs/performance.md).
type JSONAppender interface {
	AppendJSON(dst []byte) []byte
}

// EncodeJSON encodes v into a buffer of bodyBuffers, which the caller puts
// back with PutJSONBuffer once it has written the bytes.
func EncodeJSON(v any) (*bytes.Buffer, error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	// Encode writes what json.Marshal would, HTML-escaped as well, plus the
	// trailing newline; encoding into a reused buffer spares a response's
	// allocations and the copy that appending the newline made.
	if a, ok := v.(JSONAppender); ok {
		buf.Write(a.AppendJSON(buf.AvailableBuffer()))
	} else if err := json.NewEncoder(buf).Encode(v); err != nil {
		PutJSONBuffer(buf)
		return nil, err
	}
	return buf, nil
}

// WriteBody writes body as the response with status and contentType.
func WriteBody(c echo.Context, status int, contentType string, body []byte) error {
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

// bodyBuffers holds the buffers JSON responses are encoded and pages
// rendered into.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledJSONBuffer bounds the buffers kept for reuse, so that one large
// response does not stay in memory for good.
const maxPooledJSONBuffer = 64 << 10

// PutJSONBuffer gives a buffer of EncodeJSON (or Render) back for reuse.
func PutJSONBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledJSONBuffer {
		return
	}
	buf.Reset()
	bodyBuffers.Put(buf)
}
