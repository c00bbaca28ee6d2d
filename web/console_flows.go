package web

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/pages"
)

// consoleCaller is the flows module's caller for the signed-in staff member:
// the organization comes from the session only.
func consoleCaller(c echo.Context) flows.Caller {
	m := staffOf(c)
	return flows.Caller{OrganizationID: m.OrganizationID, ClientID: staffActor(m)}
}

const consoleFlowsPerPage = 20

// handleConsoleFlows handles "GET /console/flows": the organization's flows,
// filtered, searched by reference, a page at a time.
func (s *Server) handleConsoleFlows(c echo.Context) error {
	q := c.QueryParams()
	filters := pages.FlowFilters{Status: q.Get("status"), Archived: q.Get("archived") == "true",
		Sandbox: q.Get("sandbox"), Query: strings.TrimSpace(q.Get("q"))}
	p := flows.ListParams{Limit: consoleFlowsPerPage, Archived: filters.Archived, Status: flows.ConsentStatus(filters.Status),
		ReferenceID: strings.ToUpper(filters.Query), StartingAfter: q.Get("starting_after"), EndingBefore: q.Get("ending_before"),
		WithIncidents: true}
	switch filters.Sandbox {
	case "":
	case "true", "false":
		b := filters.Sandbox == "true"
		p.Sandbox = &b
	default:
		return apperr.New(apperr.Invalid, "The sandbox filter must be true or false.")
	}
	page, err := s.flows.List(c.Request().Context(), consoleCaller(c), p)
	if err != nil {
		if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
			return apperr.New(apperr.Invalid, "This list address is not valid. Start again from the flows list.")
		}
		return err
	}
	rows := make([]pages.FlowRow, len(page.Flows))
	for i, f := range page.Flows {
		rows[i] = pages.FlowRow{URL: s.echo.Reverse("console.flow", f.ID), Reference: f.ReferenceID, ReferenceName: f.ReferenceName,
			MaskedNationalID: consent.MaskNationalID(f.NationalID), ConsentStatus: string(f.ConsentStatus),
			ProcessStatus: string(f.ProcessStatus), Incidents: len(f.Incidents), Sandbox: f.Sandbox,
			Created: consoleTime(f.CreatedAt), CreatedISO: f.CreatedAt.UTC().Format(time.RFC3339)}
	}
	return s.renderConsole(c, http.StatusOK, pages.FlowList(pages.FlowListPage{
		Frame: s.frame(c, "flows", "Flows"), Filters: filters, Rows: rows,
		Statuses: []string{string(flows.Unopened), string(flows.Opened), string(flows.Accepted), string(flows.Rejected), string(flows.Withdrawn), string(flows.Expired)},
		Pager:    flowPager(filters, page, p), Filtered: filters.Status != "" || filters.Sandbox != "" || filters.Query != "",
	}))
}

// flowPager links the neighbouring pages with cursors, keeping the filters.
func flowPager(f pages.FlowFilters, page flows.Page, p flows.ListParams) pages.Pager {
	if len(page.Flows) == 0 {
		return pages.Pager{}
	}
	link := func(cursor, id string) string {
		v := url.Values{}
		if f.Status != "" {
			v.Set("status", f.Status)
		}
		if f.Archived {
			v.Set("archived", "true")
		}
		if f.Sandbox != "" {
			v.Set("sandbox", f.Sandbox)
		}
		if f.Query != "" {
			v.Set("q", f.Query)
		}
		v.Set(cursor, id)
		return "/console/flows?" + v.Encode()
	}
	var out pages.Pager
	first, last := page.Flows[0].ID, page.Flows[len(page.Flows)-1].ID
	backwards := p.EndingBefore != ""
	if p.StartingAfter != "" || (backwards && page.HasMore) {
		out.PrevURL = link("ending_before", first)
	}
	if backwards || page.HasMore {
		out.NextURL = link("starting_after", last)
	}
	return out
}

// consoleFlow loads the flow named by the path for the staff member's
// organization; anything else is the console's one 404.
func (s *Server) consoleFlow(c echo.Context) (flows.Flow, error) {
	f, err := s.flows.Get(c.Request().Context(), consoleCaller(c), c.Param("id"))
	return f, consoleNotFound(err, flows.ErrNotFound)
}

// handleConsoleFlow handles "GET /console/flows/:id".
func (s *Server) handleConsoleFlow(c echo.Context) error {
	f, err := s.consoleFlow(c)
	if err != nil {
		return err
	}
	return s.renderFlowDetail(c, f, false)
}

// handleConsoleRevealNationalID handles "POST /console/flows/:id/reveal"
// (admins): the page again with the national id in full, once, recorded in
// the audit log. It is a POST so that the id is never in a URL or a cache.
// A reveal changes nothing, so there is no transaction to join: the entry is
// written first, and the id shown only once it has committed (no record, no
// reveal). The flow is read before, to name it and to refuse another
// organization's; reading it reveals nothing.
func (s *Server) handleConsoleRevealNationalID(c echo.Context) error {
	f, err := s.consoleFlow(c)
	if err != nil {
		return err
	}
	if err := s.auditFirst(c, identity.AuditFlowRevealNationalID, f.ReferenceID, ""); err != nil {
		return err
	}
	return s.renderFlowDetail(c, f, true)
}

func (s *Server) renderFlowDetail(c echo.Context, f flows.Flow, reveal bool) error {
	ctx := c.Request().Context()
	org := staffOf(c).OrganizationID
	tasks, err := s.flows.Tasks(ctx, consoleCaller(c), f.ID)
	if err != nil {
		return consoleNotFound(err, flows.ErrNotFound)
	}
	var attempts []webhooks.Attempt
	var events webhooks.EventPage
	if s.webhooks != nil {
		if attempts, err = s.webhooks.Attempts(ctx, org, f.ID); err != nil {
			return err
		}
		if events, err = s.webhooks.Events(ctx, org, webhooks.EventQuery{FlowID: f.ID, Limit: webhooks.MaxEventLimit}); err != nil {
			return err
		}
	}
	self := s.echo.Reverse("console.flow", f.ID)
	p := pages.FlowDetailPage{Frame: s.frame(c, "flows", f.ReferenceID), ID: f.ID, URL: self, Reference: f.ReferenceID,
		ReferenceName: f.ReferenceName, NationalID: consent.MaskNationalID(f.NationalID), Revealed: reveal,
		LastName: f.LastName, ConsentStatus: string(f.ConsentStatus), ProcessStatus: string(f.ProcessStatus),
		Sandbox: f.Sandbox, HasErrors: f.HasErrors, Version: f.Version, CanCancel: f.ProcessStatus == flows.Active,
		CanWithdraw: f.ConsentStatus == flows.Accepted}
	receipts, err := s.flows.Attachments(ctx, consoleCaller(c), f.ID)
	if err != nil {
		return consoleNotFound(err, flows.ErrNotFound)
	}
	for i, a := range receipts {
		// A flow's receipts are its decision's and then, maybe, its withdrawal's.
		decision := flows.DecisionWithdrawn
		if i == 0 {
			decision = flows.DecisionAccepted
			if f.ConsentStatus == flows.Rejected {
				decision = flows.DecisionRejected
			}
		}
		p.Receipts = append(p.Receipts, pages.ReceiptRow{ID: a.ID, Decision: decision, Signed: consoleTime(a.CreatedAt),
			URL: self + "/receipts/" + a.ID})
	}
	if reveal {
		p.NationalID = f.NationalID
	}
	if f.ProcessStatus == flows.Active {
		p.ConsentURL = f.ConsentURL
	}
	p.Details = []pages.KV{
		{Label: "Flow id", Value: f.ID, Code: true},
		{Label: "Flow number", Value: strconv.FormatInt(f.Number, 10)},
		{Label: "Version", Value: strconv.Itoa(f.Version)},
		{Label: "Redirect URL", Value: f.RedirectURL, Code: true},
		{Label: "Webhook URL", Value: orDash(f.WebhookURL), Code: f.WebhookURL != ""},
		{Label: "Organization number", Value: orDash(f.OrganizationNumber)},
		{Label: "Process instance", Value: f.ProcessInstanceID, Code: true},
		{Label: "Consent definition", Value: definitionLabel(f)},
		{Label: "Updated", Value: consoleTime(f.UpdatedAt)},
	}
	if ev := f.Evidence; ev.TextSHA256 != nil {
		p.Details = append(p.Details,
			pages.KV{Label: "Text SHA-256", Value: hex.EncodeToString(ev.TextSHA256), Code: true},
			pages.KV{Label: "Shown in", Value: languageName(ev.Language)},
			pages.KV{Label: "eID assurance", Value: orDash(ev.AssuranceLevel)},
			pages.KV{Label: "Valid until", Value: untilLabel(ev.ValidUntil, f.ConsentStatus)})
	}
	var proven *time.Time
	proofStep := s.consent != nil && s.cfg.ConsentAuth == "oidc"
	if proofStep {
		if proven, err = s.consent.IdentityProvenAt(ctx, consent.FlowRef{OrganizationID: f.OrganizationID, FlowID: f.ID}); err != nil && !errors.Is(err, consent.ErrUnknownLink) {
			return err
		}
	}
	p.Timeline = flowTimeline(f, proofStep, proven)
	for _, t := range tasks {
		p.Tasks = append(p.Tasks, pages.TaskRow{Type: t.TaskType, Category: t.TaskCategory, Status: t.Status,
			Created: consoleTime(t.CreatedAt), Updated: consoleTime(t.UpdatedAt)})
	}
	for _, inc := range f.Incidents {
		p.Incidents = append(p.Incidents, pages.IncidentRow{TaskType: inc.TaskType, Message: inc.Message,
			Opened: consoleTime(inc.OpenedAt), RetryURL: s.echo.Reverse("console.flow.retry", f.ID, inc.ID)})
	}
	for _, a := range attempts {
		row := pages.AttemptRow{At: a.At.UTC().Format("2006-01-02 15:04:05 UTC"), Event: string(a.EventType),
			Latency: strconv.FormatInt(a.Latency.Milliseconds(), 10) + " ms", Error: orDash(a.Error), OK: a.Error == "" && a.StatusCode >= 200 && a.StatusCode < 300}
		if a.StatusCode == 0 {
			row.Status = "no response"
		} else {
			row.Status = strconv.Itoa(a.StatusCode)
		}
		p.Attempts = append(p.Attempts, row)
	}
	for _, e := range events.Events {
		p.Events = append(p.Events, pages.EventRow{ID: e.ID, Type: string(e.Type), Sequence: e.Sequence, Created: consoleTime(e.CreatedAt),
			RedeliverURL: s.echo.Reverse("console.flow.redeliver", f.ID, e.ID)})
	}
	return s.renderConsole(c, http.StatusOK, pages.FlowDetail(p))
}

// flowTimeline is the consent's story: created, opened, identity proven
// (when proof is asked for), decided, when an acceptance expires (or
// expired), and when the link expires (or expired).
func flowTimeline(f flows.Flow, proofStep bool, proven *time.Time) []pages.TimelineStep {
	steps := []pages.TimelineStep{{Label: "Created", At: consoleTime(f.CreatedAt), Done: true}}
	steps = append(steps, pages.TimelineStep{Label: "Opened by the person", At: consoleTimePtr(f.OpenedAt, "not yet"), Done: f.OpenedAt != nil})
	if proofStep {
		steps = append(steps, pages.TimelineStep{Label: "Identity proven", At: consoleTimePtr(proven, "not yet"), Done: proven != nil})
	}
	switch {
	case f.WithdrawnAt != nil:
		steps = append(steps, pages.TimelineStep{Label: string(flows.Accepted), At: consoleTimePtr(f.DecidedAt, "—"), Done: true},
			pages.TimelineStep{Label: "Withdrawn", At: consoleTime(*f.WithdrawnAt), Done: true})
	case f.ExpiredAt != nil:
		steps = append(steps, pages.TimelineStep{Label: string(flows.Accepted), At: consoleTimePtr(f.DecidedAt, "—"), Done: true},
			pages.TimelineStep{Label: "Expired", At: consoleTime(*f.ExpiredAt), Done: true})
	case f.DecidedAt != nil:
		steps = append(steps, pages.TimelineStep{Label: string(f.ConsentStatus), At: consoleTime(*f.DecidedAt), Done: true})
		if f.ConsentStatus == flows.Accepted && f.Evidence.ValidUntil != nil {
			steps = append(steps, pages.TimelineStep{Label: "Expires", At: consoleTime(*f.Evidence.ValidUntil), Done: false})
		}
	case f.ProcessStatus == flows.Cancelled:
		steps = append(steps, pages.TimelineStep{Label: "Cancelled or expired", At: consoleTime(f.UpdatedAt), Done: true})
	default:
		steps = append(steps, pages.TimelineStep{Label: "Decision", At: "pending", Done: false})
	}
	label := "Link expires"
	if f.ProcessStatus != flows.Active {
		label = "Link would have expired"
	}
	steps = append(steps, pages.TimelineStep{Label: label, At: consoleTime(f.ExpiresAt), Done: false})
	return steps
}

// definitionLabel names the definition version a flow pinned.
func definitionLabel(f flows.Flow) string {
	label := f.FlowDefinitionID + ", version " + strconv.Itoa(f.FlowDefinitionVersion)
	if f.VersionTag != "" {
		label += " (" + f.VersionTag + ")"
	}
	return label
}

func languageName(code string) string {
	switch code {
	case "nb":
		return "Norwegian (bokmål)"
	case "en":
		return "English"
	}
	return orDash(code)
}

// untilLabel is when an acceptance ends.
func untilLabel(until *time.Time, status flows.ConsentStatus) string {
	switch {
	case status != flows.Accepted:
		return "—"
	case until == nil:
		return "until withdrawn"
	}
	return consoleTime(*until)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// handleConsoleRetryIncident handles "POST /console/flows/:id/incidents/:incident/retry"
// (admins): the incident's delivery task is sent again at once.
func (s *Server) handleConsoleRetryIncident(c echo.Context) error {
	f, err := s.consoleFlow(c)
	if err != nil {
		return err
	}
	var taskID string
	for _, inc := range f.Incidents {
		if inc.ID == c.Param("incident") {
			taskID = inc.TaskID
		}
	}
	if taskID == "" {
		// Resolved meanwhile, or not this flow's: show the flow as it is now.
		return c.Redirect(http.StatusSeeOther, s.echo.Reverse("console.flow", f.ID))
	}
	err = s.webhooks.RetryTask(c.Request().Context(), staffOf(c).OrganizationID, taskID,
		audited(s, c, identity.AuditTaskRetry, func(ev webhooks.EventType) (string, string) {
			return f.ReferenceID, "task " + taskID + ", " + string(ev) + " event"
		}))
	if err != nil {
		return consoleNotFound(err, webhooks.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, withNotice(s.echo.Reverse("console.flow", f.ID), "retried", f.ReferenceID))
}

// handleConsoleCancelConfirm handles "GET /console/flows/:id/cancel" (admins).
func (s *Server) handleConsoleCancelConfirm(c echo.Context) error {
	f, err := s.consoleFlow(c)
	if err != nil {
		return err
	}
	self := s.echo.Reverse("console.flow", f.ID)
	if f.ProcessStatus != flows.Active {
		return c.Redirect(http.StatusSeeOther, self)
	}
	return s.renderConsole(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: s.frame(c, "flows", "Cancel "+f.ReferenceID),
		Heading: "Cancel flow " + f.ReferenceID + "?", Message: "The consent link stops working at once and the organization's webhook hears flow.cancelled. This cannot be undone.",
		Details: flowConfirmDetails(f), Action: self + "/cancel", Button: "Cancel flow", Danger: true, BackURL: self}))
}

// handleConsoleCancel handles "POST /console/flows/:id/cancel" (admins):
// the cancel and its audit entry commit together.
func (s *Server) handleConsoleCancel(c echo.Context) error {
	f, err := s.flows.Cancel(c.Request().Context(), consoleCaller(c), c.Param("id"), etag.Any,
		audited(s, c, identity.AuditFlowCancel, func(f flows.Flow) (string, string) { return f.ReferenceID, "" }))
	if errors.Is(err, flows.ErrNotActive) {
		return apperr.New(apperr.Conflict, "The flow is no longer active, so it cannot be cancelled.")
	}
	if err != nil {
		return consoleNotFound(err, flows.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, withNotice(s.echo.Reverse("console.flow", f.ID), "cancelled", f.ReferenceID))
}

// handleConsoleDeleteConfirm handles "GET /console/flows/:id/delete" (admins).
func (s *Server) handleConsoleDeleteConfirm(c echo.Context) error {
	f, err := s.consoleFlow(c)
	if err != nil {
		return err
	}
	self := s.echo.Reverse("console.flow", f.ID)
	return s.renderConsole(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: s.frame(c, "flows", "Delete "+f.ReferenceID),
		Heading: "Delete flow " + f.ReferenceID + "?",
		Message: "The flow, its consent request, tasks, incidents and personal data are deleted for good. Only the reference, flow id, who and when stay in the deletions log.",
		Details: flowConfirmDetails(f), Action: self + "/delete", Button: "Delete for good", Danger: true, BackURL: self}))
}

func flowConfirmDetails(f flows.Flow) []pages.KV {
	return []pages.KV{{Label: "Reference", Value: f.ReferenceID}, {Label: "National id", Value: consent.MaskNationalID(f.NationalID), Code: true},
		{Label: "Consent", Value: string(f.ConsentStatus)}, {Label: "Created", Value: consoleTime(f.CreatedAt)}}
}

// handleConsoleDelete handles "POST /console/flows/:id/delete" (admins): the
// flow is gone, and the list says so. The delete and its audit entry commit
// together.
func (s *Server) handleConsoleDelete(c echo.Context) error {
	d, err := s.flows.Delete(c.Request().Context(), consoleCaller(c), c.Param("id"), etag.Any,
		audited(s, c, identity.AuditFlowDelete, func(d flows.Deletion) (string, string) {
			return d.ReferenceID, fmt.Sprintf("flow %s", d.FlowID)
		}), s.forgetAnswers(staffOf(c).OrganizationID))
	if err != nil {
		return consoleNotFound(err, flows.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, withNotice(s.echo.Reverse("console.flows"), "deleted", d.ReferenceID))
}

// handleConsoleDeletions handles "GET /console/deletions": the deletion
// log, newest first, a page at a time (before = the last flow id seen).
func (s *Server) handleConsoleDeletions(c echo.Context) error {
	before := c.QueryParam("before")
	list, more, err := s.flows.Deletions(c.Request().Context(), staffOf(c).OrganizationID, 25, before)
	if err != nil {
		if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
			return apperr.New(apperr.Invalid, "This page address is not valid. Start again from the deletions log.")
		}
		return err
	}
	rows := make([]pages.DeletionRow, len(list))
	for i, d := range list {
		rows[i] = pages.DeletionRow{Reference: d.ReferenceID, FlowID: d.FlowID, By: d.DeletedBy, At: consoleTime(d.DeletedAt)}
	}
	var pager pages.Pager
	if before != "" {
		pager.PrevURL, pager.PrevLabel = "/console/deletions", "← Newest"
	}
	if more && len(list) > 0 {
		pager.NextURL, pager.NextLabel = "/console/deletions?before="+url.QueryEscape(list[len(list)-1].FlowID), "Older →"
	}
	return s.renderConsole(c, http.StatusOK, pages.Deletions(pages.DeletionsPage{Frame: s.frame(c, "deletions", "Deletions"), Rows: rows, Pager: pager}))
}

// handleConsoleReceipt handles "GET /console/flows/:id/receipts/:attachmentId":
// one of the flow's receipts, as the API serves it.
func (s *Server) handleConsoleReceipt(c echo.Context) error {
	a, err := s.flows.Attachment(c.Request().Context(), consoleCaller(c), c.Param("id"), c.Param("attachmentId"))
	if err != nil {
		return consoleNotFound(err, flows.ErrNotFound)
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="consent-receipt-`+a.ID+`.jwt"`)
	return c.Blob(http.StatusOK, a.ContentType, []byte(a.Body))
}

// handleConsoleWithdrawConfirm handles "GET /console/flows/:id/withdraw"
// (admins): the organization withdraws on the person's behalf, with a reason.
func (s *Server) handleConsoleWithdrawConfirm(c echo.Context) error {
	f, err := s.consoleFlow(c)
	if err != nil {
		return err
	}
	self := s.echo.Reverse("console.flow", f.ID)
	if f.ConsentStatus != flows.Accepted {
		return c.Redirect(http.StatusSeeOther, self)
	}
	return s.renderConsole(c, http.StatusOK, s.withdrawConfirm(c, f, ""))
}

func (s *Server) withdrawConfirm(c echo.Context, f flows.Flow, problem string) templ.Component {
	// problem, when set, says what was wrong with the reason sent.
	self := s.echo.Reverse("console.flow", f.ID)
	return pages.Confirm(pages.ConfirmPage{Frame: s.frame(c, "flows", "Withdraw "+f.ReferenceID),
		Heading: "Withdraw the consent of " + f.ReferenceID + "?",
		Message: "Do this when the person asked you to. The consent becomes Withdrawn, a withdrawal receipt is signed, and the webhook hears flow.withdrawn. This cannot be undone.",
		Details: flowConfirmDetails(f), Action: self + "/withdraw", Button: "Withdraw consent", Danger: true, BackURL: self,
		Reason: true, ReasonError: problem})
}

// handleConsoleWithdraw handles "POST /console/flows/:id/withdraw" (admins):
// the withdrawal and its audit entry, with the reason, commit together.
func (s *Server) handleConsoleWithdraw(c echo.Context) error {
	reason, ok := withdrawReason(c.FormValue("reason"))
	if !ok {
		f, err := s.consoleFlow(c)
		if err != nil {
			return err
		}
		return s.renderConsole(c, http.StatusBadRequest, s.withdrawConfirm(c, f,
			fmt.Sprintf("Give a reason of 1 to %d characters.", maxWithdrawReason)))
	}
	f, err := s.withdrawals.Withdraw(c.Request().Context(), consoleCaller(c), c.Param("id"), etag.Any,
		audited(s, c, identity.AuditFlowWithdraw, func(f flows.Flow) (string, string) { return f.ReferenceID, reason }))
	if errors.Is(err, flows.ErrNotAccepted) {
		return apperr.New(apperr.Conflict, "Only an accepted consent can be withdrawn.")
	}
	if err != nil {
		return consoleNotFound(err, flows.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, withNotice(s.echo.Reverse("console.flow", f.ID), "withdrawn", f.ReferenceID))
}
