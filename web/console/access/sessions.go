package access

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// This file is the console's sessions page: each staff member sees and ends
// their own sessions; an admin sees and ends everyone's in the organization.

// ownerOf is the signed-in staff member as the owner of sessions.
func ownerOf(m console.StaffMember) staff.SessionOwner {
	return staff.SessionOwner{OrganizationID: m.OrganizationID, Issuer: m.Issuer, Subject: m.Subject}
}

// owns reports whether sess is one of m's.
func owns(m console.StaffMember, sess staff.Session) bool {
	return sess.Issuer == m.Issuer && sess.Subject == m.Subject
}

// sessionKindLabel is how the page names a kind of session.
func sessionKindLabel(k staff.SessionKind) string {
	if k == staff.SessionProvider {
		return "Sign-in service (single sign-on)"
	}
	return "Console"
}

// sessionRow is the page's row of sess; current names the sessions of
// the browser looking at the page.
func sessionRow(sess staff.Session, current map[string]bool) pages.SessionRow {
	return pages.SessionRow{ID: sess.ID, Kind: sessionKindLabel(sess.Kind), Started: console.Time(sess.CreatedAt),
		LastSeen: console.Time(sess.LastSeenAt), Browser: sess.UserAgent, Address: sess.Address, Current: current[sess.ID],
		EndURL: "/console/sessions/" + sess.ID + "/end"}
}

// HandleConsoleSessions handles "GET /console/sessions".
func (h *Handler) HandleConsoleSessions(c echo.Context) error {
	ctx := c.Request().Context()
	m := console.StaffOf(c)
	owner := ownerOf(m)
	own, err := h.sessions.ListSessions(ctx, m.OrganizationID, &owner)
	if err != nil {
		return err
	}
	// This browser's sessions: the console session of the request and the
	// provider session it was signed in through.
	current := map[string]bool{m.SessionID: true}
	for _, sess := range own {
		if sess.ID == m.SessionID && sess.ProviderSessionID != "" {
			current[sess.ProviderSessionID] = true
		}
	}
	p := pages.SessionsPage{Frame: h.console.Frame(c, "sessions", "Sessions")}
	for _, sess := range own {
		p.Own = append(p.Own, sessionRow(sess, current))
		if !current[sess.ID] {
			p.OthersURL = "/console/sessions/others/end"
		}
	}
	if m.IsAdmin() {
		all, err := h.sessions.ListSessions(ctx, m.OrganizationID, nil)
		if err != nil {
			return err
		}
		p.People, p.Truncated = sessionPeople(all, current, h.builtInIssuer), len(all) >= sessionListLimit
	}
	return h.console.Render(c, http.StatusOK, pages.Sessions(p))
}

// sessionListLimit is how many sessions staff.Sessions lists at most.
const sessionListLimit = 1000

// sessionPeople groups sessions (ordered by person) into people; an issuer
// other than builtIn is named.
func sessionPeople(all []staff.Session, current map[string]bool, builtIn string) []pages.SessionPerson {
	var people []pages.SessionPerson
	for i, sess := range all {
		if i == 0 || sess.Issuer != all[i-1].Issuer || sess.Subject != all[i-1].Subject {
			person := pages.SessionPerson{Username: sess.Username, EndAllURL: "/console/sessions/" + sess.ID + "/end-all"}
			if sess.Issuer != builtIn {
				person.Issuer = sess.Issuer
			}
			people = append(people, person)
		}
		last := &people[len(people)-1]
		last.Rows = append(last.Rows, sessionRow(sess, current))
	}
	return people
}

// endableSession returns the session of the path that the signed-in staff
// member may end: their own, or, for an admin, any of the organization's.
func (h *Handler) endableSession(c echo.Context) (staff.Session, error) {
	m := console.StaffOf(c)
	sess, err := h.sessions.Session(c.Request().Context(), m.OrganizationID, c.Param("id"))
	if err != nil {
		return sess, err
	}
	if !owns(m, sess) && !m.IsAdmin() {
		return sess, staff.ErrSessionNotFound
	}
	return sess, nil
}

// sessionDetails describes a session on a confirmation page.
func sessionDetails(sess staff.Session) []pages.KV {
	return []pages.KV{{Label: "Person", Value: sess.Username}, {Label: "Kind", Value: sessionKindLabel(sess.Kind)},
		{Label: "Started", Value: console.Time(sess.CreatedAt)}, {Label: "Last seen", Value: console.Time(sess.LastSeenAt)},
		{Label: "Browser", Value: sess.UserAgent}, {Label: "Address", Value: sess.Address, Code: true}}
}

// whyEnded is why the audit log says the signed-in staff member ended
// someone's sessions: their own, or as an admin.
func whyEnded(m console.StaffMember, owner staff.Session) string {
	if owns(m, owner) {
		return staff.EndedBySelf
	}
	return staff.EndedByAdmin
}

// HandleConsoleEndSessionConfirm handles "GET /console/sessions/:id/end".
func (h *Handler) HandleConsoleEndSessionConfirm(c echo.Context) error {
	sess, err := h.endableSession(c)
	if err != nil {
		return err
	}
	return h.console.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.console.Frame(c, "sessions", "End a session"),
		Heading: "End this session?", Details: sessionDetails(sess), Danger: true, Button: "End session",
		Message: "The browser of this session is signed out at once, at the console and at the sign-in service; its next page asks for the password.",
		Action:  "/console/sessions/" + sess.ID + "/end", BackURL: "/console/sessions"}))
}

// HandleConsoleEndSession handles "POST /console/sessions/:id/end".
func (h *Handler) HandleConsoleEndSession(c echo.Context) error {
	m := console.StaffOf(c)
	sess, err := h.endableSession(c)
	if err != nil {
		return err
	}
	_, err = h.sessions.EndSession(c.Request().Context(), m.OrganizationID, sess.ID, httpkit.SessionsEnded(h.audit, console.StaffActor(m), whyEnded(m, sess)))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/sessions", "session_ended", sess.Username))
}

// HandleConsoleEndPersonSessionsConfirm handles "GET /console/sessions/:id/end-all".
func (h *Handler) HandleConsoleEndPersonSessionsConfirm(c echo.Context) error {
	sess, err := h.endableSession(c)
	if err != nil {
		return err
	}
	return h.console.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.console.Frame(c, "sessions", "End all sessions"),
		Heading: "End every session of " + sess.Username + "?", Details: []pages.KV{{Label: "Person", Value: sess.Username}},
		Message: "Every browser signed in as this person is signed out at once, at the console and at the sign-in service.",
		Danger:  true, Button: "End all sessions", Action: "/console/sessions/" + sess.ID + "/end-all", BackURL: "/console/sessions"}))
}

// HandleConsoleEndPersonSessions handles "POST /console/sessions/:id/end-all":
// every session of the person whose session id is.
func (h *Handler) HandleConsoleEndPersonSessions(c echo.Context) error {
	m := console.StaffOf(c)
	sess, err := h.endableSession(c)
	if err != nil {
		return err
	}
	owner := staff.SessionOwner{OrganizationID: m.OrganizationID, Issuer: sess.Issuer, Subject: sess.Subject}
	_, err = h.sessions.EndSessionsOf(c.Request().Context(), owner, "", httpkit.SessionsEnded(h.audit, console.StaffActor(m), whyEnded(m, sess)))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/sessions", "sessions_ended", sess.Username))
}

// HandleConsoleEndOtherSessionsConfirm handles "GET /console/sessions/others/end".
func (h *Handler) HandleConsoleEndOtherSessionsConfirm(c echo.Context) error {
	return h.console.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.console.Frame(c, "sessions", "Sign out everywhere else"),
		Heading: "Sign out everywhere else?", Button: "Sign out everywhere else", Danger: true,
		Message: "Every other browser signed in as you is signed out at once, at the console and at the sign-in service. This browser stays signed in.",
		Action:  "/console/sessions/others/end", BackURL: "/console/sessions"}))
}

// HandleConsoleEndOtherSessions handles "POST /console/sessions/others/end":
// every session of the signed-in person but this browser's.
func (h *Handler) HandleConsoleEndOtherSessions(c echo.Context) error {
	m := console.StaffOf(c)
	ended, err := h.sessions.EndSessionsOf(c.Request().Context(), ownerOf(m), m.SessionID, httpkit.SessionsEnded(h.audit, console.StaffActor(m), staff.EndedBySelf))
	if err != nil {
		return err
	}
	key := "others_ended"
	if len(ended) == 0 {
		key = "no_others"
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/sessions", key, ""))
}
