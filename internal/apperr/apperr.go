// Package apperr is flowd's one application error model. Modules return *Error
// values with a Code and a message that is safe to show; the web layer maps the
// Code to an HTTP status and a problem+json body or an error page. Any other
// error is internal: logged with the request id and shown as a generic message.
package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Code names a kind of problem. Each code has a stable problem type URI.
type Code string

const (
	Invalid              Code = "invalid"                // bad input; Fields names each offender
	Unprocessable        Code = "unprocessable"          // well-formed, but names what does not exist or fit; Fields names each offender
	NotFound             Code = "not-found"              // missing, or not visible to the caller
	Conflict             Code = "conflict"               // state does not allow the operation
	ConsentNotInForce    Code = "consent-not-in-force"   // a use of a consent not accepted or no longer valid
	Unauthenticated      Code = "unauthenticated"        // no or bad credentials
	Forbidden            Code = "forbidden"              // authenticated, but not allowed
	InsufficientScope    Code = "insufficient-scope"     // the token lacks a scope
	UnsupportedMediaType Code = "unsupported-media-type" // body is not JSON
	TooLarge             Code = "too-large"              // body over the limit
	IdempotencyMismatch  Code = "idempotency-key-reused" // same key, different body
	PreconditionFailed   Code = "precondition-failed"    // If-Match names another version
	RateLimited          Code = "rate-limited"           // too many attempts
	Unavailable          Code = "unavailable"            // a dependency (the database) is down
	MethodNotAllowed     Code = "method-not-allowed"     // the route exists for other methods
	Internal             Code = "internal"               // anything unexpected
)

// FieldError names one offending input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error whose Message may be shown to the caller.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	// Scope is the missing scope of an InsufficientScope error.
	Scope string
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter time.Duration
	// Err is the cause, kept for logs and errors.Is; never shown.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of the given code with a safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of the given code that keeps err as its hidden cause.
func Wrap(err error, code Code, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// InvalidFields returns an Invalid error naming every offending field.
func InvalidFields(fields []FieldError) *Error {
	return &Error{Code: Invalid, Message: "The request has invalid fields.", Fields: fields}
}

// CodeOf reports the Code of err, or Internal when err carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// UnprocessableFields returns an Unprocessable error naming every field
// that refers to something unknown or that does not fit what it refers to.
func UnprocessableFields(fields []FieldError) *Error {
	return &Error{Code: Unprocessable, Message: "The request names what does not exist or does not fit.", Fields: fields}
}

// Fields collects field errors in the order they are found.
type Fields []FieldError

// Add records a problem with field.
func (f *Fields) Add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns an Invalid error naming every field added, or nil when there are none.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return InvalidFields(f)
}
