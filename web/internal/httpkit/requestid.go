package httpkit

import "github.com/labstack/echo/v4"

const requestIDKey = "request_id"

// SetRequestID gives c the id of its request, which every log line of it
// names.
func SetRequestID(c echo.Context, id string) { c.Set(requestIDKey, id) }

// RequestID returns the id SetRequestID gave c.
func RequestID(c echo.Context) string {
	id, _ := c.Get(requestIDKey).(string)
	return id
}
