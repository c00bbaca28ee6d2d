package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// useRequest is the body of POST /api/flows/:id/uses.
type useRequest struct {
	Action         string      `json:"action"`
	UsedAt         *apiInstant `json:"usedAt"`
	DataCategories []string    `json:"dataCategories"`
	Reference      string      `json:"reference"`
}

// useJSON is a use as the API shows it, the OpenAPI document's Use.
type useJSON struct {
	ID             string   `json:"id"`
	FlowID         string   `json:"flowId"`
	Action         string   `json:"action"`
	DataCategories []string `json:"dataCategories"`
	Reference      *string  `json:"reference"`
	// Resource is the data holder's resource of a consent token's use,
	// null for the uses the organization records.
	Resource   *string    `json:"resource"`
	UsedAt     apiInstant `json:"usedAt"`
	RecordedAt apiInstant `json:"recordedAt"`
}

func toUseJSON(u flows.Use) useJSON {
	categories := u.DataCategories
	if categories == nil {
		categories = []string{}
	}
	return useJSON{ID: u.ID, FlowID: u.FlowID, Action: u.Action, DataCategories: categories, Reference: nonEmpty(u.Reference),
		Resource: nonEmpty(u.Resource), UsedAt: apiInstant(u.UsedAt), RecordedAt: apiInstant(u.RecordedAt)}
}

type useList struct {
	HasMore bool      `json:"has_more"`
	Data    []useJSON `json:"data"`
}

// HandleUseCreate handles "POST /api/flows/:id/uses": the organization
// records a use of the flow's accepted consent. A consent not in force is a
// 409, and the attempt is kept in the organization's audit log.
func (h *Handler) HandleUseCreate(c echo.Context) error {
	var req useRequest
	in := func() flows.NewUse {
		return flows.NewUse{Action: req.Action, UsedAt: (*time.Time)(req.UsedAt), DataCategories: req.DataCategories, Reference: req.Reference}
	}
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, in().Normalize().Validate(time.Now()))
	}
	p := httpkit.Principal(c)
	refused := func(ctx context.Context, tx database.Tx, f flows.Flow) error {
		return httpkit.AuditFailed(h.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: p.OrganizationID,
			Actor: "client:" + p.ClientID, Action: identity.AuditFlowUseRefused, Target: f.ReferenceID,
			Detail: "consent " + string(f.ConsentStatus)}))
	}
	answer := func(u flows.Use) reply {
		return reply{status: http.StatusCreated, body: toUseJSON(u), flowID: u.FlowID}
	}
	u, err := h.flows.RecordUse(c.Request().Context(), callerOf(c), c.Param("id"), in(), refused, keepReply(c, answer))
	if err != nil {
		return flowError(err)
	}
	return h.writeReply(c, answer(u))
}

// useQueryParams are the query parameters GET /api/flows/:id/uses takes.
var useQueryParams = map[string]bool{"limit": true, "starting_after": true, "ending_before": true}

// HandleUseList handles "GET /api/flows/:id/uses": the flow's recorded
// uses, latest first, a page at a time.
func (h *Handler) HandleUseList(c echo.Context) error {
	q := c.QueryParams()
	var problems apperr.Fields
	for name, v := range q {
		if !useQueryParams[name] {
			problems.Add(name, "unknown query parameter")
		} else if len(v) > 1 {
			problems.Add(name, "must be given once")
		}
	}
	var p flows.UseParams
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > flows.MaxLimit {
			problems.Add("limit", "must be a whole number from 1 to %d", flows.MaxLimit)
		} else {
			p.Limit = n
		}
	}
	for name, dst := range map[string]*string{"starting_after": &p.StartingAfter, "ending_before": &p.EndingBefore} {
		if v, ok := q[name]; ok {
			if *dst = v[0]; *dst == "" {
				problems.Add(name, "must be a use id")
			}
		}
	}
	problems = withFieldsOf(problems, p.Check())
	if err := problems.Err(); err != nil {
		return err
	}
	page, err := h.flows.Uses(c.Request().Context(), callerOf(c), c.Param("id"), p)
	if err != nil {
		return flowError(err)
	}
	out := useList{HasMore: page.HasMore, Data: make([]useJSON, len(page.Uses))}
	for i, u := range page.Uses {
		out.Data[i] = toUseJSON(u)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}
