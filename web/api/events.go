package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// eventJSON is an event as the events API shows it. An event of no flow
// (endpoint.disabled) has a null flowId and sequence.
type eventJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	FlowID    *string         `json:"flowId"`
	Sequence  *int            `json:"sequence"`
	CreatedAt apiInstant      `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
	// Test marks an event sent to one endpoint to try it.
	Test bool `json:"test"`
}

type eventList struct {
	HasMore bool        `json:"has_more"`
	Data    []eventJSON `json:"data"`
}

type eventDetail struct {
	eventJSON
	Deliveries []deliveryJSON `json:"deliveries"`
}

type deliveryJSON struct {
	ID         string        `json:"id"`
	URL        string        `json:"url"`
	State      string        `json:"state"`
	LastError  *string       `json:"lastError"`
	CreatedAt  apiInstant    `json:"createdAt"`
	FinishedAt *apiInstant   `json:"finishedAt"`
	Attempts   []attemptJSON `json:"attempts"`
}

type attemptJSON struct {
	At         apiInstant `json:"at"`
	StatusCode *int       `json:"statusCode"` // null when no response came
	Error      *string    `json:"error"`
	LatencyMs  int64      `json:"latencyMs"`
}

// eventQueryParams are the query parameters GET /api/events knows.
var eventQueryParams = map[string]bool{"limit": true, "type": true, "flowId": true, "createdAfter": true,
	"createdBefore": true, "starting_after": true, "ending_before": true}

func toEventJSON(e webhooks.EventRecord) eventJSON {
	out := eventJSON{ID: e.ID, Type: string(e.Type), FlowID: nonEmpty(e.FlowID), CreatedAt: apiInstant(e.CreatedAt), Data: e.Data,
		Test: e.Test}
	if e.Sequence > 0 {
		out.Sequence = &e.Sequence
	}
	return out
}

// HandleEventList handles "GET /api/events": the organization's events,
// newest first, for clients that poll instead of receiving webhooks.
func (h *Handler) HandleEventList(c echo.Context) error {
	q := c.QueryParams()
	var problems apperr.Fields
	for name, v := range q {
		if !eventQueryParams[name] {
			problems.Add(name, "unknown query parameter")
		} else if len(v) > 1 {
			problems.Add(name, "must be given once")
		}
	}
	var eq webhooks.EventQuery
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > webhooks.MaxEventLimit {
			problems.Add("limit", "must be a whole number from 1 to %d", webhooks.MaxEventLimit)
		} else {
			eq.Limit = n
		}
	}
	eq.Type, eq.FlowID = webhooks.EventType(q.Get("type")), q.Get("flowId")
	eq.StartingAfter, eq.EndingBefore = q.Get("starting_after"), q.Get("ending_before")
	for name, dst := range map[string]*time.Time{"createdAfter": &eq.CreatedAfter, "createdBefore": &eq.CreatedBefore} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				problems.Add(name, "must be an RFC 3339 time, such as 2026-01-02T03:04:05Z")
			}
			*dst = t
		}
	}
	problems = withFieldsOf(problems, eq.Check())
	if err := problems.Err(); err != nil {
		return err
	}
	page, err := h.webhooks.Events(c.Request().Context(), callerOf(c).OrganizationID, eq)
	if err != nil {
		return err
	}
	out := eventList{HasMore: page.HasMore, Data: make([]eventJSON, len(page.Events))}
	for i, e := range page.Events {
		out.Data[i] = toEventJSON(e)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleEventGet handles "GET /api/events/:id": one event with its
// deliveries and every attempt of each.
func (h *Handler) HandleEventGet(c echo.Context) error {
	e, deliveries, err := h.webhooks.Event(c.Request().Context(), callerOf(c).OrganizationID, c.Param("id"))
	if errors.Is(err, webhooks.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No event with this id.")
	}
	if err != nil {
		return err
	}
	out := eventDetail{eventJSON: toEventJSON(e), Deliveries: make([]deliveryJSON, len(deliveries))}
	for i, d := range deliveries {
		dj := deliveryJSON{ID: d.ID, URL: d.URL, State: d.State, LastError: nonEmpty(d.LastError),
			CreatedAt: apiInstant(d.CreatedAt), FinishedAt: (*apiInstant)(d.FinishedAt), Attempts: make([]attemptJSON, len(d.Attempts))}
		for j, a := range d.Attempts {
			aj := attemptJSON{At: apiInstant(a.At), Error: nonEmpty(a.Error), LatencyMs: a.Latency.Milliseconds()}
			if a.StatusCode != 0 {
				code := a.StatusCode
				aj.StatusCode = &code
			}
			dj.Attempts[j] = aj
		}
		out.Deliveries[i] = dj
	}
	return h.writeUnversioned(c, http.StatusOK, out)
}

// redeliverRequest is the body of POST /api/events/:id/redeliver; no body
// means every destination.
type redeliverRequest struct {
	EndpointID string `json:"endpointId"`
}

type redeliverResponse struct {
	Status     string `json:"status"`
	Deliveries int    `json:"deliveries"`
}

// HandleEventRedeliver handles "POST /api/events/:id/redeliver": the event
// goes out again now, to every destination it had, or to one endpoint; the
// audit log records it in the redelivery's transaction.
func (h *Handler) HandleEventRedeliver(c echo.Context) error {
	var req redeliverRequest
	if c.Request().ContentLength != 0 {
		if err := httpkit.DecodeJSON(c, &req); err != nil {
			return err
		}
	}
	answer := func(n int) reply {
		return reply{status: http.StatusAccepted, body: redeliverResponse{Status: "scheduled", Deliveries: n}}
	}
	n, err := h.webhooks.Redeliver(c.Request().Context(), callerOf(c).OrganizationID, c.Param("id"), req.EndpointID,
		apiAudited(h, c, identity.AuditEventRedeliver, func(r webhooks.Redelivery) (string, string) {
			return r.EventID, httpkit.RedeliveryAudit(r)
		}), keepReply(c, func(r webhooks.Redelivery) reply { return answer(r.Deliveries) }))
	switch {
	case errors.Is(err, webhooks.ErrNotFound):
		return apperr.New(apperr.NotFound, "No event with this id.")
	case errors.Is(err, webhooks.ErrEndpointNotFound):
		return apperr.InvalidFields([]apperr.FieldError{{Field: "endpointId", Message: "is not an endpoint of this organization"}})
	case errors.Is(err, webhooks.ErrNothingToRedeliver):
		return apperr.New(apperr.Conflict, "The event has no delivery to send again: its flow has no webhookUrl and no endpoint received it, or the flow was deleted. Name an endpoint to send it there.")
	case err != nil:
		return err
	}
	return h.writeReply(c, answer(n))
}
