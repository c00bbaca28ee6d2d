package api

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// apiTime is how the API writes instants: RFC 3339, UTC, milliseconds.
const apiTime = "2006-01-02T15:04:05.000Z"

// formatTime writes t as time.Format(apiTime) would, by hand: a list page
// writes two instants per flow, and the general formatter parses its layout
// each time.
func formatTime(t time.Time) string {
	var b [len(apiTime)]byte
	return string(appendTime(b[:0], t))
}

// appendTime appends t as formatTime writes it.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, apiTime)
	}
	hour, minute, second := t.Clock()
	var b [len(apiTime)]byte
	digits := func(at, v, n int) {
		for i := at + n - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	digits(0, year, 4)
	b[4] = '-'
	digits(5, int(month), 2)
	b[7] = '-'
	digits(8, day, 2)
	b[10] = 'T'
	digits(11, hour, 2)
	b[13] = ':'
	digits(14, minute, 2)
	b[16] = ':'
	digits(17, second, 2)
	b[19] = '.'
	digits(20, t.Nanosecond()/1e6, 3)
	b[23] = 'Z'
	return append(dst, b[:]...)
}

// flowError maps the flows module's sentinel errors to application errors;
// it is the one place the API decides what they mean to a caller.
func flowError(err error) error {
	switch {
	case errors.Is(err, flows.ErrNotFound):
		return apperr.New(apperr.NotFound, "No flow with this id.")
	case errors.Is(err, flows.ErrNotActive):
		return apperr.New(apperr.Conflict, "The flow is no longer active.")
	case errors.Is(err, flows.ErrNotAccepted):
		return apperr.New(apperr.Conflict, "Only an accepted consent can be withdrawn.")
	case errors.Is(err, flows.ErrConsentNotInForce):
		return apperr.New(apperr.ConsentNotInForce, "The consent is not accepted, or its validity has ended: a use of it cannot be recorded.")
	}
	return err
}

// callerOf turns the verified principal into the flows module's caller.
func callerOf(c echo.Context) flows.Caller {
	p := httpkit.Principal(c)
	return flows.Caller{OrganizationID: p.OrganizationID, ClientID: p.ClientID, Sandbox: p.Sandbox}
}

type href struct {
	Href string `json:"href"`
}

// createFlowRequest is the body of POST /api/flows.
type createFlowRequest struct {
	NationalID    string `json:"nationalId"`
	LastName      string `json:"lastName"`
	RedirectURL   string `json:"redirectUrl"`
	WebhookURL    string `json:"webhookUrl"`
	ReferenceName string `json:"referenceName"`
	// FlowDefinitionID is the consent definition (the organization's
	// default when empty); FlowDefinitionVersion its version (the latest
	// when 0).
	FlowDefinitionID      string `json:"flowDefinitionId"`
	FlowDefinitionVersion int    `json:"flowDefinitionVersion"`
	// Parameters value the definition version's parameters.
	Parameters map[string]string `json:"parameters"`
}

func (req createFlowRequest) newFlow() flows.NewFlow {
	return flows.NewFlow{NationalID: req.NationalID, LastName: req.LastName, RedirectURL: req.RedirectURL,
		WebhookURL: req.WebhookURL, ReferenceName: req.ReferenceName,
		FlowDefinitionID: req.FlowDefinitionID, FlowDefinitionVersion: req.FlowDefinitionVersion, Parameters: req.Parameters}
}

type createFlowResponse struct {
	Links struct {
		Self    href `json:"self"`
		Consent href `json:"consent"`
	} `json:"_links"`
	FlowID      string `json:"flowId"`
	ReferenceID string `json:"referenceId"`
}

func flowPath(id string) string { return "/api/flows/" + id }

// HandleFlowCreate handles "POST /api/flows".
func (h *Handler) HandleFlowCreate(c echo.Context) error {
	var req createFlowRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		// Name the fields that decoded but are invalid too, so that one
		// answer lists every problem of the body.
		return httpkit.WithFieldErrors(err, req.newFlow().Normalize().Validate(flows.Rules{
			NationalIDs: h.cfg.NationalIDs(nil), AllowInsecureURLs: h.cfg.AllowInsecureURLs}))
	}
	created, err := h.flows.Create(c.Request().Context(), callerOf(c), req.newFlow(), keepReply(c, flowCreated))
	if err != nil {
		return flowError(err)
	}
	return h.writeReply(c, flowCreated(created))
}

// flowCreated is the answer to a create. It names no flow for its kept
// answer to be forgotten by: it holds nothing personal, and replays after
// the flow is deleted.
func flowCreated(created flows.Created) reply {
	return reply{status: http.StatusCreated, header: http.Header{echo.HeaderLocation: {flowPath(created.FlowID)}},
		body: createdBody(created)}
}

// createdBody is the body of a create's answer.
func createdBody(created flows.Created) createFlowResponse {
	var resp createFlowResponse
	resp.Links.Self.Href = flowPath(created.FlowID)
	resp.Links.Consent.Href = created.ConsentURL
	resp.FlowID, resp.ReferenceID = created.FlowID, created.ReferenceID
	return resp
}

// flowListItem is one flow of GET /api/flows: the flow's summary, as the
// list shows it.
type flowListItem struct {
	ID             string     `json:"id"`
	NationalID     string     `json:"nationalId"`
	OrganizationID string     `json:"organizationId"`
	Status         string     `json:"status"`
	ReferenceID    string     `json:"referenceId"`
	FlowNumber     int64      `json:"flowNumber"`
	Sandbox        bool       `json:"sandbox"`
	Archived       bool       `json:"archived"`
	CreatedAt      apiInstant `json:"createdAt"`
	UpdatedAt      apiInstant `json:"updatedAt"`
	// FlowDefinitionID is the consent definition the flow pinned.
	FlowDefinitionID string `json:"flowDefinitionId"`
}

type flowList struct {
	HasMore bool           `json:"has_more"`
	Data    []flowListItem `json:"data"`
}

// listQueryParams are the query parameters GET /api/flows understands.
var listQueryParams = map[string]bool{"limit": true, "archived": true, "status": true, "starting_after": true, "ending_before": true}

// HandleFlowList handles "GET /api/flows".
func (h *Handler) HandleFlowList(c echo.Context) error {
	q := c.QueryParams()
	var problems apperr.Fields
	for name := range q {
		if !listQueryParams[name] {
			problems.Add(name, "unknown query parameter")
		}
	}
	var p flows.ListParams
	single := func(name string) (string, bool) {
		v, ok := q[name]
		if !ok {
			return "", false
		}
		if len(v) > 1 {
			problems.Add(name, "must be given once")
		}
		return v[0], true
	}
	if v, ok := single("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > flows.MaxLimit {
			problems.Add("limit", "must be a whole number from 1 to %d", flows.MaxLimit)
		} else {
			p.Limit = n
		}
	}
	if v, ok := single("archived"); ok {
		switch v {
		case "true":
			p.Archived = true
		case "false":
		default:
			problems.Add("archived", "must be true or false")
		}
	}
	if v, ok := single("status"); ok {
		p.Status = flows.ConsentStatus(v)
	}
	if v, ok := single("starting_after"); ok {
		p.StartingAfter = v
		if v == "" {
			problems.Add("starting_after", "must be a flow id")
		}
	}
	if v, ok := single("ending_before"); ok {
		p.EndingBefore = v
		if v == "" {
			problems.Add("ending_before", "must be a flow id")
		}
	}
	problems = withFieldsOf(problems, p.Check())
	if err := problems.Err(); err != nil {
		return err
	}
	page, err := h.flows.List(c.Request().Context(), callerOf(c), p)
	if err != nil {
		return flowError(err)
	}
	out := flowList{HasMore: page.HasMore, Data: make([]flowListItem, len(page.Flows))}
	for i, f := range page.Flows {
		out.Data[i] = flowListItem{
			ID: f.ID, NationalID: f.NationalID, OrganizationID: f.OrganizationID, Status: string(f.ConsentStatus),
			ReferenceID: f.ReferenceID, FlowNumber: f.Number, Sandbox: f.Sandbox, Archived: f.Archived(),
			CreatedAt: apiInstant(f.CreatedAt), UpdatedAt: apiInstant(f.UpdatedAt), FlowDefinitionID: f.FlowDefinitionID,
		}
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// withFieldsOf adds the field errors of err, a module's check of the
// parameters, to those the handler found, each field named once.
func withFieldsOf(problems apperr.Fields, err error) apperr.Fields {
	e, ok := apperr.As(err)
	if !ok {
		return problems
	}
	for _, f := range e.Fields {
		if !slices.ContainsFunc(problems, func(p apperr.FieldError) bool { return p.Field == f.Field }) {
			problems = append(problems, f)
		}
	}
	return problems
}

// flowEnvelope is the body of GET /api/flows/:id: the flow's links and its
// full detail, as the OpenAPI document's FlowEnvelope.
type flowEnvelope struct {
	Links struct {
		Self    string `json:"self"`
		Tasks   href   `json:"tasks"`
		Consent href   `json:"consent"`
	} `json:"_links"`
	Flow flowDetail `json:"flow"`
}

type flowDetail struct {
	FlowID           string                  `json:"flowId"`
	Version          int                     `json:"version"`
	HasErrors        bool                    `json:"hasErrors"`
	HasIncidents     bool                    `json:"hasIncidents"`
	Incidents        map[string]incidentJSON `json:"incidents"`
	Status           string                  `json:"status"`
	Consent          consentJSON             `json:"consent"`
	CreatedAt        apiInstant              `json:"createdAt"`
	UpdatedAt        apiInstant              `json:"updatedAt"`
	NumAttachments   int                     `json:"numAttachments"`
	Meta             metaJSON                `json:"_meta"`
	FlowDefinitionID string                  `json:"flowDefinitionId"`
	FlowNumber       int64                   `json:"flowNumber"`
	ReferenceID      string                  `json:"referenceId"`
	ReferenceName    *string                 `json:"referenceName"`
	VersionTag       *string                 `json:"versionTag"`
	Sandbox          bool                    `json:"sandbox"`
	SandboxConfig    struct{}                `json:"sandboxConfig"` // always {}: no sandbox settings exist yet
	Data             flowDataJSON            `json:"data"`
	// Parameters value the pinned definition's parameters; {} when none.
	Parameters map[string]string `json:"parameters"`
	Actions    []string          `json:"actions"`
}

type incidentJSON struct {
	ID           string `json:"id"`
	Message      string `json:"message"`
	TaskType     string `json:"taskType"`
	TaskCategory string `json:"taskCategory"`
}

type consentJSON struct {
	Status      string      `json:"status"`
	OpenedAt    *apiInstant `json:"openedAt"`
	DecidedAt   *apiInstant `json:"decidedAt"`
	WithdrawnAt *apiInstant `json:"withdrawnAt"`
	ExpiresAt   apiInstant  `json:"expiresAt"`
	// The decision's evidence; null before it.
	TextSHA256     *string     `json:"textSha256"`
	Language       *string     `json:"language"`
	AssuranceLevel *string     `json:"assuranceLevel"`
	ValidUntil     *apiInstant `json:"validUntil"`
	// When the acceptance expired at ValidUntil; null until then.
	ExpiredAt *apiInstant `json:"expiredAt"`
	// The use ledger: the latest use's usedAt (null before the first), and
	// how many uses were recorded.
	LastUsedAt *apiInstant `json:"lastUsedAt"`
	NumUses    int         `json:"numUses"`
}

type metaJSON struct {
	ProcessDefinitionID string `json:"processDefinitionId"`
	ProcessInstanceID   string `json:"processInstanceId"`
	ProcessVersion      string `json:"processVersion"`
}

type flowDataJSON struct {
	NationalID         string `json:"nationalId"`
	LastName           string `json:"lastName"`
	RedirectURL        string `json:"redirectUrl"`
	WebhookURL         string `json:"webhookUrl"`
	OrganizationNumber string `json:"organizationNumber"`
}

// envelopeOf renders a flow for a caller holding p's scopes.
func envelopeOf(f flows.Flow, p identity.Principal) flowEnvelope {
	var e flowEnvelope
	e.Links.Self = flowPath(f.ID)
	e.Links.Tasks.Href = "/api/tasks?flowId=" + url.QueryEscape(f.ID)
	e.Links.Consent.Href = f.ConsentURL
	d := flowDetail{
		FlowID: f.ID, Version: f.Version, HasErrors: f.HasErrors, HasIncidents: len(f.Incidents) > 0,
		Incidents: make(map[string]incidentJSON, len(f.Incidents)), Status: string(f.ProcessStatus),
		Consent: consentJSON{Status: string(f.ConsentStatus), OpenedAt: (*apiInstant)(f.OpenedAt),
			DecidedAt: (*apiInstant)(f.DecidedAt), WithdrawnAt: (*apiInstant)(f.WithdrawnAt), ExpiresAt: apiInstant(f.ExpiresAt),
			Language: nonEmpty(f.Evidence.Language), AssuranceLevel: nonEmpty(f.Evidence.AssuranceLevel),
			ValidUntil: (*apiInstant)(f.Evidence.ValidUntil), ExpiredAt: (*apiInstant)(f.ExpiredAt),
			LastUsedAt: (*apiInstant)(f.LastUsedAt), NumUses: f.NumUses},
		CreatedAt: apiInstant(f.CreatedAt), UpdatedAt: apiInstant(f.UpdatedAt), NumAttachments: f.NumAttachments,
		Meta: metaJSON{ProcessDefinitionID: f.ProcessDefinitionID(), ProcessInstanceID: f.ProcessInstanceID,
			ProcessVersion: strconv.Itoa(f.FlowDefinitionVersion)},
		FlowDefinitionID: f.FlowDefinitionID, VersionTag: nonEmpty(f.VersionTag), FlowNumber: f.Number, ReferenceID: f.ReferenceID,
		Sandbox: f.Sandbox,
		Data: flowDataJSON{NationalID: f.NationalID, LastName: f.LastName, RedirectURL: f.RedirectURL,
			WebhookURL: f.WebhookURL, OrganizationNumber: f.OrganizationNumber},
		Parameters: f.Parameters,
		Actions:    []string{"read"},
	}
	if d.Parameters == nil {
		d.Parameters = map[string]string{}
	}
	if f.Evidence.TextSHA256 != nil {
		sum := hex.EncodeToString(f.Evidence.TextSHA256)
		d.Consent.TextSHA256 = &sum
	}
	for _, i := range f.Incidents {
		d.Incidents[i.ID] = incidentJSON{ID: i.ID, Message: i.Message, TaskType: i.TaskType, TaskCategory: flows.CategoryIncident}
	}
	if f.ReferenceName != "" {
		name := f.ReferenceName
		d.ReferenceName = &name
	}
	if f.ProcessStatus == flows.Active && p.HasScope(identity.ScopeFlowsWrite) {
		d.Actions = append(d.Actions, "cancel")
	}
	e.Flow = d
	return e
}

// nonEmpty is s, or nil (JSON null) when s is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// HandleFlowGet handles "GET /api/flows/:id".
func (h *Handler) HandleFlowGet(c echo.Context) error {
	f, err := h.flows.Get(c.Request().Context(), callerOf(c), c.Param("id"))
	if err != nil {
		return flowError(err)
	}
	return h.writeResource(c, http.StatusOK, f.ETag(), envelopeOf(f, httpkit.Principal(c)))
}

// flowReply answers a change of a flow with the flow, as GET /api/flows/:id
// shows it to p.
func flowReply(p identity.Principal) func(flows.Flow) reply {
	return func(f flows.Flow) reply {
		return reply{status: http.StatusOK, header: http.Header{"Etag": {f.ETag()}}, body: envelopeOf(f, p), flowID: f.ID}
	}
}

// HandleFlowCancel handles "POST /api/flows/:id/cancel": it answers with the
// cancelled flow, as GET /api/flows/:id shows it; a flow that is no longer
// active is a 409.
func (h *Handler) HandleFlowCancel(c echo.Context) error {
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	answer := flowReply(httpkit.Principal(c))
	f, err := h.flows.Cancel(c.Request().Context(), callerOf(c), c.Param("id"), cond, keepReply(c, answer))
	if err != nil {
		return flowError(err)
	}
	return h.writeReply(c, answer(f))
}

// withdrawRequest is the body of POST /api/flows/:id/withdraw.
type withdrawRequest struct {
	Reason string `json:"reason"`
}

// HandleFlowWithdraw handles "POST /api/flows/:id/withdraw": the
// organization withdraws an accepted consent on the person's behalf; the
// reason goes to the audit log in the withdrawal's transaction.
func (h *Handler) HandleFlowWithdraw(c echo.Context) error {
	var req withdrawRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	reason, ok := httpkit.WithdrawReason(req.Reason)
	if !ok {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "reason",
			Message: fmt.Sprintf("is required: 1 to %d characters without control or formatting characters", httpkit.MaxWithdrawReason)}})
	}
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	p := httpkit.Principal(c)
	answer := flowReply(p)
	f, err := h.withdrawals.Withdraw(c.Request().Context(), callerOf(c), c.Param("id"), cond,
		func(ctx context.Context, tx database.Tx, f flows.Flow) error {
			return httpkit.AuditFailed(h.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: p.OrganizationID,
				Actor: "client:" + p.ClientID, Action: identity.AuditFlowWithdraw, Target: f.ReferenceID, Detail: reason}))
		}, keepReply(c, answer))
	if err != nil {
		return flowError(err)
	}
	return h.writeReply(c, answer(f))
}

type deleteFlowResponse struct {
	Status      string `json:"status"`
	FlowID      string `json:"flowId"`
	ReferenceID string `json:"referenceId"`
}

// HandleFlowDelete handles "DELETE /api/flows/:id".
func (h *Handler) HandleFlowDelete(c echo.Context) error {
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	d, err := h.flows.Delete(c.Request().Context(), callerOf(c), c.Param("id"), cond, httpkit.ForgetAnswers(h.answers, callerOf(c).OrganizationID))
	if err != nil {
		return flowError(err)
	}
	return httpkit.WriteJSON(c, http.StatusOK, deleteFlowResponse{Status: "deleted", FlowID: d.FlowID, ReferenceID: d.ReferenceID})
}

type taskJSON struct {
	ID           string `json:"id"`
	FlowID       string `json:"flowId"`
	TaskType     string `json:"taskType"`
	TaskCategory string `json:"taskCategory"`
	Status       string `json:"status"`
	CreatedAt    string `json:"createdAt"`
	UpdatedAt    string `json:"updatedAt"`
}

type taskList struct {
	HasMore bool       `json:"has_more"`
	Data    []taskJSON `json:"data"`
}

// HandleTaskList handles "GET /api/tasks?flowId=": every task of one flow,
// oldest first.
func (h *Handler) HandleTaskList(c echo.Context) error {
	ids, ok := c.QueryParams()["flowId"]
	if !ok || len(ids) != 1 || ids[0] == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "flowId", Message: "is required, once"}})
	}
	tasks, err := h.flows.Tasks(c.Request().Context(), callerOf(c), ids[0])
	if err != nil {
		return flowError(err)
	}
	out := taskList{Data: make([]taskJSON, len(tasks))}
	for i, t := range tasks {
		out.Data[i] = taskJSON{ID: t.ID, FlowID: t.FlowID, TaskType: t.TaskType, TaskCategory: t.TaskCategory,
			Status: t.Status, CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt)}
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}
