package httpkit

import (
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/fieldcheck"
)

// Form is the one form-binding helper of the pages: it reads a submitted
// form and collects an error per field, so that a refused form re-renders
// with what was typed and what is wrong with it.
type Form struct {
	values url.Values
	Errors map[string]string
}

// BindForm reads the request's form.
func BindForm(c echo.Context) (*Form, error) {
	v, err := c.FormParams()
	if err != nil {
		return nil, apperr.New(apperr.Invalid, "The form could not be read.")
	}
	return &Form{values: v, Errors: map[string]string{}}, nil
}

// Value returns a field as it was sent.
func (f *Form) Value(name string) string { return f.values.Get(name) }

// Text returns a trimmed field, noting an error when it is longer than max
// characters or contains control or formatting characters.
func (f *Form) Text(name string, max int) string {
	v := strings.TrimSpace(f.values.Get(name))
	switch {
	case utf8.RuneCountInString(v) > max:
		f.Fail(name, "Use at most %d characters.", max)
	case strings.ContainsFunc(v, fieldcheck.IsControlOrFormat):
		f.Fail(name, "Remove the control and formatting characters.")
	}
	return v
}

// Bool reports whether a checkbox was ticked.
func (f *Form) Bool(name string) bool {
	v := f.values.Get(name)
	return v == "true" || v == "on" || v == "1"
}

// All returns every value of a repeated field (checkboxes).
func (f *Form) All(name string) []string { return f.values[name] }

// Lines returns the non-empty trimmed lines of a text area.
func (f *Form) Lines(name string, maxLines int) []string {
	var out []string
	for _, l := range strings.Split(f.values.Get(name), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > maxLines {
		f.Fail(name, "List at most %d lines.", maxLines)
	}
	if slices.ContainsFunc(out, func(l string) bool { return strings.ContainsFunc(l, fieldcheck.IsControlOrFormat) }) {
		f.Fail(name, "Remove the control and formatting characters.")
	}
	return out
}

// Fail notes an error of a field; a field's errors are shown together.
func (f *Form) Fail(name, format string, args ...any) {
	msg := apperr.New(apperr.Invalid, format, args...).Message
	if prev, ok := f.Errors[name]; ok {
		msg = prev + " " + msg
	}
	f.Errors[name] = msg
}

// Valid reports whether no field failed.
func (f *Form) Valid() bool { return len(f.Errors) == 0 }

// Refused takes a module's apperr Invalid error and notes each of its fields
// under the form's name for it (fields maps module names to form names). It
// reports whether err was such an error; any other error is the caller's.
func (f *Form) Refused(err error, fields map[string]string) bool {
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.Invalid {
		return false
	}
	for _, fe := range e.Fields {
		name, ok := fields[fe.Field]
		if !ok {
			name = fe.Field
		}
		f.Fail(name, "%s", Sentence(fe.Message))
	}
	if len(e.Fields) == 0 {
		f.Fail("form", "%s", e.Message)
	}
	return true
}

// Sentence makes a module's field message ("must be …") read as a sentence.
func Sentence(msg string) string {
	if msg == "" {
		return msg
	}
	r, size := utf8.DecodeRuneInString(msg)
	msg = strings.ToUpper(string(r)) + msg[size:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}
