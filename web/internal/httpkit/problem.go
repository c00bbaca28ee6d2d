package httpkit

import (
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
)

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail,omitempty"`
	Errors []apperr.FieldError `json:"errors,omitempty"`
}

// WriteProblem writes an RFC 9457 problem body.
func WriteProblem(c echo.Context, status int, p Problem) error {
	return writeJSONType(c, status, "application/problem+json", p)
}
