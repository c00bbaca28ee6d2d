package console

import (
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/views/layouts"
)

// This file is what the console's page packages (web/console/access) share
// with its own pages: the frame, rendering, notices, the one not-found
// answer, the audit trail and how times read.

// Frame builds the layout's view model of a page of section for the
// signed-in staff member.
func (h *Handler) Frame(c echo.Context, section, title string) layouts.Console {
	return h.frame(c, section, title)
}

// Render renders a console page, never cached.
func (h *Handler) Render(c echo.Context, status int, page templ.Component) error {
	return h.renderConsole(c, status, page)
}

// AuditFirst records a staff action that only shows something before it is
// shown; the caller shows it only when this returns nil.
func (h *Handler) AuditFirst(c echo.Context, action, target, detail string) error {
	return h.auditFirst(c, action, target, detail)
}

// Audited returns the hook that records a staff action in the audit log in
// the transaction of the action itself.
func Audited[T any](h *Handler, c echo.Context, action string, describe func(done T) (target, detail string)) database.BeforeCommit[T] {
	return audited(h, c, action, describe)
}

// StaffOf is the signed-in staff member of a request RequireStaff admitted.
func StaffOf(c echo.Context) StaffMember { return staffOf(c) }

// StaffActor is how a staff member appears in the deletion and audit logs.
func StaffActor(m StaffMember) string { return staffActor(m) }

// WithNotice adds a notice (a key of the console's notices) to a console path.
func WithNotice(path, key, ref string) string { return withNotice(path, key, ref) }

// ErrNotFound is the one answer for anything a staff member cannot see.
var ErrNotFound = errConsoleNotFound

// NotFound maps the modules' not-found errors to ErrNotFound.
func NotFound(err error, sentinels ...error) error { return consoleNotFound(err, sentinels...) }

// Time is how the console shows an instant: UTC, to the minute.
func Time(t time.Time) string { return consoleTime(t) }

// TimePtr shows an optional instant, or none.
func TimePtr(t *time.Time, none string) string { return consoleTimePtr(t, none) }

// OrDash is s, or a dash when s is empty.
func OrDash(s string) string { return orDash(s) }
