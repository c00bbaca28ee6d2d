package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// Conditional requests (RFC 9110 section 13): every answer that is one
// resource carries its ETag; a GET whose If-None-Match names it is answered
// 304 Not Modified, and a write's If-Match goes to the module that makes the
// change, which checks it under the lock of the write.

// ifMatch reads the request's If-Match condition for a module's write. A
// header that is neither "*" nor entity tags is an apperr Invalid error.
func ifMatch(c echo.Context) (etag.IfMatch, error) {
	return etag.ParseIfMatch(c.Request().Header.Values("If-Match"))
}

// writeResource writes v, one resource whose module tags it by its version
// (tag), as JSON with status and its ETag. A GET whose If-None-Match names
// the tag is answered 304 without encoding the body.
func (h *Handler) writeResource(c echo.Context, status int, tag string, v any) error {
	c.Response().Header().Set("ETag", tag)
	if notModified(c, status, tag) {
		return c.NoContent(http.StatusNotModified)
	}
	return httpkit.WriteJSON(c, status, v)
}

// writeUnversioned writes v, one resource that has no version (the API
// cannot change it), as JSON with status, tagged by a hash of its body.
func (h *Handler) writeUnversioned(c echo.Context, status int, v any) error {
	buf, err := httpkit.EncodeJSON(v)
	if err != nil {
		return err
	}
	defer httpkit.PutJSONBuffer(buf)
	return writeTagged(c, status, echo.MIMEApplicationJSON, buf.Bytes())
}

// writeTagged writes body with status and contentType, tagged by a hash of
// body, or 304 to a GET whose If-None-Match names that tag.
func writeTagged(c echo.Context, status int, contentType string, body []byte) error {
	tag := etag.Of(body)
	c.Response().Header().Set("ETag", tag)
	if notModified(c, status, tag) {
		return c.NoContent(http.StatusNotModified)
	}
	return httpkit.WriteBody(c, status, contentType, body)
}

// notModified reports whether a GET's answer with status and tag would be
// the copy its If-None-Match names.
func notModified(c echo.Context, status int, tag string) bool {
	r := c.Request()
	if status != http.StatusOK || r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	lines := r.Header.Values("If-None-Match")
	return len(lines) > 0 && etag.NoneMatch(lines, tag)
}

// bodyTag is the entity tag writeUnversioned gives v, for an answer kept
// for an Idempotency-Key, which is encoded later.
func bodyTag(v any) string {
	buf, err := httpkit.EncodeJSON(v)
	if err != nil {
		return ""
	}
	defer httpkit.PutJSONBuffer(buf)
	return etag.Of(buf.Bytes())
}
