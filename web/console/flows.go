package console

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
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
	"github.com/flowd/flowd/web/internal/httpkit"
)

// consoleCaller is the flows module's caller for the signed-in staff member:
// the organization comes from the session only.
func consoleCaller(c echo.Context) flows.Caller {
	m := StaffOf(c)
	return flows.Caller{OrganizationID: m.OrganizationID, ClientID: StaffActor(m)}
}

const consoleFlowsPerPage = 20

// HandleConsoleFlows handles "GET /console/flows": the organization's flows,
// filtered, searched by reference, a page at a time.
func (h *Handler) HandleConsoleFlows(c echo.Context) error {
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
	page, err := h.flows.List(c.Request().Context(), consoleCaller(c), p)
	if err != nil {
		if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
			return apperr.New(apperr.Invalid, "This list address is not valid. Start again from the flows list.")
		}
		return err
	}
	rows := make([]pages.FlowRow, len(page.Flows))
	for i, f := range page.Flows {
		rows[i] = pages.FlowRow{URL: c.Echo().Reverse("console.flow", f.ID), Reference: f.ReferenceID, ReferenceName: f.ReferenceName,
			MaskedNationalID: consent.MaskNationalID(f.NationalID), ConsentStatus: string(f.ConsentStatus),
			ProcessStatus: string(f.ProcessStatus), Incidents: len(f.Incidents), Sandbox: f.Sandbox,
			Created: Time(f.CreatedAt), CreatedISO: f.CreatedAt.UTC().Format(time.RFC3339)}
	}
	return h.Render(c, http.StatusOK, pages.FlowList(pages.FlowListPage{
		Frame: h.Frame(c, "flows", "Flows"), Filters: filters, Rows: rows,
		Statuses: []string{string(flows.Unopened), string(flows.Opened), string(flows.Accepted), string(flows.Rejected), string(flows.Withdrawn), string(flows.Expired)},
		Pager:    flowPager(filters, page, p), Filtered: filters.Status != "" || filters.Sandbox != "" || filters.Query != "",
		OtherStateURL: flowListURL(pages.FlowFilters{Status: filters.Status, Archived: !filters.Archived, Sandbox: filters.Sandbox, Query: filters.Query}, nil),
	}))
}

// flowListURL is the flows list with filters f and the extra query values.
func flowListURL(f pages.FlowFilters, extra url.Values) string {
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
	for k, vs := range extra {
		v[k] = vs
	}
	if len(v) == 0 {
		return "/console/flows"
	}
	return "/console/flows?" + v.Encode()
}

// flowPager links the neighbouring pages with cursors, keeping the filters.
func flowPager(f pages.FlowFilters, page flows.Page, p flows.ListParams) pages.Pager {
	if len(page.Flows) == 0 {
		return pages.Pager{}
	}
	link := func(cursor, id string) string { return flowListURL(f, url.Values{cursor: {id}}) }
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
func (h *Handler) consoleFlow(c echo.Context) (flows.Flow, error) {
	f, err := h.flows.Get(c.Request().Context(), consoleCaller(c), c.Param("id"))
	return f, NotFound(err, flows.ErrNotFound)
}

// HandleConsoleFlow handles "GET /console/flows/:id".
func (h *Handler) HandleConsoleFlow(c echo.Context) error {
	f, err := h.consoleFlow(c)
	if err != nil {
		return err
	}
	return h.renderFlowDetail(c, f, false)
}

// HandleConsoleRevealNationalID handles "POST /console/flows/:id/reveal"
// (admins): the page again with the national id in full, once, recorded in
// the audit log. It is a POST so that the id is never in a URL or a cache.
// A reveal changes nothing, so there is no transaction to join: the entry is
// written first, and the id shown only once it has committed (no record, no
// reveal). The flow is read before, to name it and to refuse another
// organization's; reading it reveals nothing.
func (h *Handler) HandleConsoleRevealNationalID(c echo.Context) error {
	f, err := h.consoleFlow(c)
	if err != nil {
		return err
	}
	if err := h.AuditFirst(c, identity.AuditFlowRevealNationalID, f.ReferenceID, ""); err != nil {
		return err
	}
	return h.renderFlowDetail(c, f, true)
}

func (h *Handler) renderFlowDetail(c echo.Context, f flows.Flow, reveal bool) error {
	ctx := c.Request().Context()
	org := StaffOf(c).OrganizationID
	tasks, err := h.flows.Tasks(ctx, consoleCaller(c), f.ID)
	if err != nil {
		return NotFound(err, flows.ErrNotFound)
	}
	attempts, err := h.webhooks.Attempts(ctx, org, f.ID)
	if err != nil {
		return err
	}
	taskEvents, err := h.webhooks.TaskEvents(ctx, org, f.ID)
	if err != nil {
		return err
	}
	events, err := h.webhooks.Events(ctx, org, webhooks.EventQuery{FlowID: f.ID, Limit: webhooks.MaxEventLimit})
	if err != nil {
		return err
	}
	var proven *time.Time
	proofStep := h.cfg.ConsentAuth == "oidc"
	if proofStep {
		if proven, err = h.consent.IdentityProvenAt(ctx, consent.FlowRef{OrganizationID: f.OrganizationID, FlowID: f.ID}); err != nil && !errors.Is(err, consent.ErrUnknownLink) {
			return err
		}
	}
	self := c.Echo().Reverse("console.flow", f.ID)
	p := flowDetailOf(f, self, reveal, proofStep, proven)
	p.Frame = h.Frame(c, "flows", f.ReferenceID)
	if p.Uses, err = h.flowUses(c, f, self); err != nil {
		return err
	}
	receipts, err := h.flows.Attachments(ctx, consoleCaller(c), f.ID)
	if err != nil {
		return NotFound(err, flows.ErrNotFound)
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
		p.Receipts = append(p.Receipts, pages.ReceiptRow{ID: a.ID, Decision: decision, Signed: Time(a.CreatedAt),
			URL: self + "/receipts/" + a.ID})
	}
	for _, t := range tasks {
		p.Tasks = append(p.Tasks, pages.TaskRow{Type: t.TaskType, Category: t.TaskCategory, Status: t.Status,
			Event: string(taskEvents[t.ID]), Created: Time(t.CreatedAt), Updated: Time(t.UpdatedAt)})
	}
	for _, a := range attempts {
		row := pages.AttemptRow{At: a.At.UTC().Format("2006-01-02 15:04:05 UTC"), Event: string(a.EventType),
			Latency: strconv.FormatInt(a.Latency.Milliseconds(), 10) + " ms", Error: OrDash(a.Error), OK: a.Error == "" && a.StatusCode >= 200 && a.StatusCode < 300}
		if a.StatusCode == 0 {
			row.Status = "no response"
		} else {
			row.Status = strconv.Itoa(a.StatusCode)
		}
		p.Attempts = append(p.Attempts, row)
	}
	for _, e := range events.Events {
		p.Events = append(p.Events, pages.EventRow{ID: e.ID, Type: string(e.Type), Sequence: e.Sequence, Created: Time(e.CreatedAt),
			RedeliverURL: c.Echo().Reverse("console.flow.redeliver", f.ID, e.ID)})
	}
	if h.notices != nil && (f.ConsentStatus == flows.Withdrawn || f.ConsentStatus == flows.Expired) {
		told, err := h.notices.NoticesOf(ctx, org, f.ID)
		if err != nil {
			return err
		}
		for _, n := range told {
			row := pages.ToldNotice{DataHolder: cmp.Or(n.DataHolderName, n.DataHolderID), Sent: Time(n.SentAt), Rejected: n.Rejected}
			if n.Acknowledged != nil {
				row.Acknowledged = Time(*n.Acknowledged)
			}
			p.Told = append(p.Told, row)
		}
	}
	return h.Render(c, http.StatusOK, pages.FlowDetail(p))
}

// flowDetailOf is the console's view of flow f, at self: everything the
// flow itself says. The handler adds what other modules know (receipts,
// tasks, deliveries, events). The national id shows in full only when
// reveal is set (and audited); proofStep and proven add the identity
// proof to the timeline.
func flowDetailOf(f flows.Flow, self string, reveal, proofStep bool, proven *time.Time) pages.FlowDetailPage {
	p := pages.FlowDetailPage{ID: f.ID, URL: self, Reference: f.ReferenceID,
		ReferenceName: f.ReferenceName, NationalID: consent.MaskNationalID(f.NationalID), Revealed: reveal,
		LastName: f.LastName, ConsentStatus: string(f.ConsentStatus), ProcessStatus: string(f.ProcessStatus),
		Sandbox: f.Sandbox, HasErrors: f.HasErrors, Version: f.Version, CanCancel: f.ProcessStatus == flows.Active,
		CanWithdraw: f.ConsentStatus == flows.Accepted}
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
		{Label: "Webhook URL", Value: OrDash(f.WebhookURL), Code: f.WebhookURL != ""},
		{Label: "Organization number", Value: OrDash(f.OrganizationNumber)},
		{Label: "Process instance", Value: f.ProcessInstanceID, Code: true},
		{Label: "Consent definition", Value: definitionLabel(f)},
		{Label: "Updated", Value: Time(f.UpdatedAt)},
		{Label: "Uses recorded", Value: strconv.Itoa(f.NumUses)},
		{Label: "Last used", Value: TimePtr(f.LastUsedAt, "never")},
	}
	if f.ExpiringNotifiedAt != nil {
		p.Details = append(p.Details, pages.KV{Label: "Expiry notice sent", Value: Time(*f.ExpiringNotifiedAt)})
	}
	if ev := f.Evidence; ev.TextSHA256 != nil {
		p.Details = append(p.Details,
			pages.KV{Label: "Text SHA-256", Value: hex.EncodeToString(ev.TextSHA256), Code: true},
			pages.KV{Label: "Shown in", Value: languageName(ev.Language)},
			pages.KV{Label: "eID assurance", Value: OrDash(ev.AssuranceLevel)},
			pages.KV{Label: "Valid until", Value: untilLabel(ev.ValidUntil, f.ConsentStatus)})
	}
	p.Timeline = flowTimeline(f, proofStep, proven)
	for _, inc := range f.Incidents {
		p.Incidents = append(p.Incidents, pages.IncidentRow{TaskType: inc.TaskType, Message: inc.Message,
			Opened: Time(inc.OpenedAt), RetryURL: self + "/incidents/" + inc.ID + "/retry"})
	}
	return p
}

// flowTimeline is the consent's story: created, opened, identity proven
// (when proof is asked for), decided, when an acceptance expires (or
// expired), and when the link expires (or expired).
func flowTimeline(f flows.Flow, proofStep bool, proven *time.Time) []pages.TimelineStep {
	steps := []pages.TimelineStep{{Label: "Created", At: Time(f.CreatedAt), Done: true}}
	steps = append(steps, pages.TimelineStep{Label: "Opened by the person", At: TimePtr(f.OpenedAt, "not yet"), Done: f.OpenedAt != nil})
	if proofStep {
		steps = append(steps, pages.TimelineStep{Label: "Identity proven", At: TimePtr(proven, "not yet"), Done: proven != nil})
	}
	switch {
	case f.WithdrawnAt != nil:
		steps = append(steps, pages.TimelineStep{Label: string(flows.Accepted), At: TimePtr(f.DecidedAt, "—"), Done: true},
			pages.TimelineStep{Label: "Withdrawn", At: Time(*f.WithdrawnAt), Done: true})
	case f.ExpiredAt != nil:
		steps = append(steps, pages.TimelineStep{Label: string(flows.Accepted), At: TimePtr(f.DecidedAt, "—"), Done: true},
			pages.TimelineStep{Label: "Expired", At: Time(*f.ExpiredAt), Done: true})
	case f.DecidedAt != nil:
		steps = append(steps, pages.TimelineStep{Label: string(f.ConsentStatus), At: Time(*f.DecidedAt), Done: true})
		if f.ConsentStatus == flows.Accepted && f.Evidence.ValidUntil != nil {
			steps = append(steps, pages.TimelineStep{Label: "Expires", At: Time(*f.Evidence.ValidUntil), Done: false})
		}
	case f.ProcessStatus == flows.Cancelled:
		steps = append(steps, pages.TimelineStep{Label: "Cancelled or expired", At: Time(f.UpdatedAt), Done: true})
	default:
		steps = append(steps, pages.TimelineStep{Label: "Decision", At: "pending", Done: false})
	}
	label := "Link expires"
	if f.ProcessStatus != flows.Active {
		label = "Link would have expired"
	}
	steps = append(steps, pages.TimelineStep{Label: label, At: Time(f.ExpiresAt), Done: false})
	return steps
}

// definitionLabel names the definition version a flow pinned.
func definitionLabel(f flows.Flow) string {
	label := f.FlowDefinitionID + ", version " + strconv.Itoa(f.FlowDefinitionVersion)
	if f.VersionTag != "" {
		label += " (" + f.VersionTag + ")"
	}
	// The flow's parameters are part of the text its person is shown.
	for i, name := range slices.Sorted(maps.Keys(f.Parameters)) {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		label += sep + name + ": " + f.Parameters[name]
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
	return OrDash(code)
}

// untilLabel is when an acceptance ends.
func untilLabel(until *time.Time, status flows.ConsentStatus) string {
	switch {
	case status != flows.Accepted:
		return "—"
	case until == nil:
		return "until withdrawn"
	}
	return Time(*until)
}

func OrDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// HandleConsoleRetryIncident handles "POST /console/flows/:id/incidents/:incident/retry"
// (admins): the incident's delivery task is sent again at once.
func (h *Handler) HandleConsoleRetryIncident(c echo.Context) error {
	f, err := h.consoleFlow(c)
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
		return c.Redirect(http.StatusSeeOther, c.Echo().Reverse("console.flow", f.ID))
	}
	err = h.webhooks.RetryTask(c.Request().Context(), StaffOf(c).OrganizationID, taskID,
		Audited(h, c, identity.AuditTaskRetry, func(ev webhooks.EventType) (string, string) {
			return f.ReferenceID, "task " + taskID + ", " + string(ev) + " event"
		}))
	if err != nil {
		return NotFound(err, webhooks.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(c.Echo().Reverse("console.flow", f.ID), "retried", f.ReferenceID))
}

// HandleConsoleCancelConfirm handles "GET /console/flows/:id/cancel" (admins).
func (h *Handler) HandleConsoleCancelConfirm(c echo.Context) error {
	f, err := h.consoleFlow(c)
	if err != nil {
		return err
	}
	self := c.Echo().Reverse("console.flow", f.ID)
	if f.ProcessStatus != flows.Active {
		return c.Redirect(http.StatusSeeOther, self)
	}
	return h.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.Frame(c, "flows", "Cancel "+f.ReferenceID),
		Heading: "Cancel flow " + f.ReferenceID + "?", Message: "The consent link stops working at once and the organization's webhook hears flow.cancelled. This cannot be undone.",
		Details: flowConfirmDetails(f), Action: self + "/cancel", Button: "Cancel flow", Danger: true, BackURL: self}))
}

// HandleConsoleCancel handles "POST /console/flows/:id/cancel" (admins):
// the cancel and its audit entry commit together.
func (h *Handler) HandleConsoleCancel(c echo.Context) error {
	f, err := h.flows.Cancel(c.Request().Context(), consoleCaller(c), c.Param("id"), etag.Any,
		Audited(h, c, identity.AuditFlowCancel, func(f flows.Flow) (string, string) { return f.ReferenceID, "" }))
	if errors.Is(err, flows.ErrNotActive) {
		return apperr.New(apperr.Conflict, "The flow is no longer active, so it cannot be cancelled.")
	}
	if err != nil {
		return NotFound(err, flows.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(c.Echo().Reverse("console.flow", f.ID), "cancelled", f.ReferenceID))
}

// HandleConsoleDeleteConfirm handles "GET /console/flows/:id/delete" (admins).
func (h *Handler) HandleConsoleDeleteConfirm(c echo.Context) error {
	f, err := h.consoleFlow(c)
	if err != nil {
		return err
	}
	self := c.Echo().Reverse("console.flow", f.ID)
	return h.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.Frame(c, "flows", "Delete "+f.ReferenceID),
		Heading: "Delete flow " + f.ReferenceID + "?",
		Message: "The flow, its consent request, tasks, incidents and personal data are deleted for good. Only the reference, flow id, who and when stay in the deletions log.",
		Details: flowConfirmDetails(f), Action: self + "/delete", Button: "Delete for good", Danger: true, BackURL: self}))
}

func flowConfirmDetails(f flows.Flow) []pages.KV {
	return []pages.KV{{Label: "Reference", Value: f.ReferenceID}, {Label: "National id", Value: consent.MaskNationalID(f.NationalID), Code: true},
		{Label: "Consent", Value: string(f.ConsentStatus)}, {Label: "Created", Value: Time(f.CreatedAt)}}
}

// HandleConsoleDelete handles "POST /console/flows/:id/delete" (admins): the
// flow is gone, and the list says so. The delete and its audit entry commit
// together.
func (h *Handler) HandleConsoleDelete(c echo.Context) error {
	d, err := h.flows.Delete(c.Request().Context(), consoleCaller(c), c.Param("id"), etag.Any,
		Audited(h, c, identity.AuditFlowDelete, func(d flows.Deletion) (string, string) {
			return d.ReferenceID, fmt.Sprintf("flow %s", d.FlowID)
		}), httpkit.ForgetAnswers(h.answers, StaffOf(c).OrganizationID))
	if err != nil {
		return NotFound(err, flows.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(c.Echo().Reverse("console.flows"), "deleted", d.ReferenceID))
}

// HandleConsoleDeletions handles "GET /console/deletions": the deletion
// log, newest first, a page at a time (before = the last flow id seen).
func (h *Handler) HandleConsoleDeletions(c echo.Context) error {
	before := c.QueryParam("before")
	list, more, err := h.flows.Deletions(c.Request().Context(), StaffOf(c).OrganizationID, 25, before)
	if err != nil {
		if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
			return apperr.New(apperr.Invalid, "This page address is not valid. Start again from the deletions log.")
		}
		return err
	}
	rows := make([]pages.DeletionRow, len(list))
	for i, d := range list {
		rows[i] = pages.DeletionRow{Reference: d.ReferenceID, FlowID: d.FlowID, By: d.DeletedBy, At: Time(d.DeletedAt)}
	}
	var pager pages.Pager
	if before != "" {
		pager.PrevURL, pager.PrevLabel = "/console/deletions", "← Newest"
	}
	if more && len(list) > 0 {
		pager.NextURL, pager.NextLabel = "/console/deletions?before="+url.QueryEscape(list[len(list)-1].FlowID), "Older →"
	}
	return h.Render(c, http.StatusOK, pages.Deletions(pages.DeletionsPage{Frame: h.Frame(c, "deletions", "Deletions"), Rows: rows, Pager: pager}))
}

// HandleConsoleReceipt handles "GET /console/flows/:id/receipts/:attachmentId":
// one of the flow's receipts, as the API serves it.
func (h *Handler) HandleConsoleReceipt(c echo.Context) error {
	a, err := h.flows.Attachment(c.Request().Context(), consoleCaller(c), c.Param("id"), c.Param("attachmentId"))
	if err != nil {
		return NotFound(err, flows.ErrNotFound)
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="consent-receipt-`+a.ID+`.jwt"`)
	return c.Blob(http.StatusOK, a.ContentType, []byte(a.Body))
}

// HandleConsoleWithdrawConfirm handles "GET /console/flows/:id/withdraw"
// (admins): the organization withdraws on the person's behalf, with a reason.
func (h *Handler) HandleConsoleWithdrawConfirm(c echo.Context) error {
	f, err := h.consoleFlow(c)
	if err != nil {
		return err
	}
	self := c.Echo().Reverse("console.flow", f.ID)
	if f.ConsentStatus != flows.Accepted {
		return c.Redirect(http.StatusSeeOther, self)
	}
	return h.Render(c, http.StatusOK, h.withdrawConfirm(c, f, ""))
}

func (h *Handler) withdrawConfirm(c echo.Context, f flows.Flow, problem string) templ.Component {
	// problem, when set, says what was wrong with the reason sent.
	self := c.Echo().Reverse("console.flow", f.ID)
	return pages.Confirm(pages.ConfirmPage{Frame: h.Frame(c, "flows", "Withdraw "+f.ReferenceID),
		Heading: "Withdraw the consent of " + f.ReferenceID + "?",
		Message: "Do this when the person asked you to. The consent becomes Withdrawn, a withdrawal receipt is signed, and the webhook hears flow.withdrawn. This cannot be undone.",
		Details: flowConfirmDetails(f), Action: self + "/withdraw", Button: "Withdraw consent", Danger: true, BackURL: self,
		Reason: true, ReasonError: problem})
}

// HandleConsoleWithdraw handles "POST /console/flows/:id/withdraw" (admins):
// the withdrawal and its audit entry, with the reason, commit together.
func (h *Handler) HandleConsoleWithdraw(c echo.Context) error {
	reason, ok := httpkit.WithdrawReason(c.FormValue("reason"))
	if !ok {
		f, err := h.consoleFlow(c)
		if err != nil {
			return err
		}
		return h.Render(c, http.StatusBadRequest, h.withdrawConfirm(c, f,
			fmt.Sprintf("Give a reason of 1 to %d characters.", httpkit.MaxWithdrawReason)))
	}
	f, err := h.withdrawals.Withdraw(c.Request().Context(), consoleCaller(c), c.Param("id"), etag.Any,
		Audited(h, c, identity.AuditFlowWithdraw, func(f flows.Flow) (string, string) { return f.ReferenceID, reason }))
	if errors.Is(err, flows.ErrNotAccepted) {
		return apperr.New(apperr.Conflict, "Only an accepted consent can be withdrawn.")
	}
	if err != nil {
		return NotFound(err, flows.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(c.Echo().Reverse("console.flow", f.ID), "withdrawn", f.ReferenceID))
}
