package console

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/views/pages"
)

// HandleConsoleStreams handles "GET /console/streams": the organization's
// Shared Signals streams, as a data holder, with each one's status and
// reason and how long its oldest undelivered SET has waited.
func (h *Handler) HandleConsoleStreams(c echo.Context) error {
	p := pages.StreamsPage{Frame: h.Frame(c, "streams", "Streams")}
	if h.streams != nil {
		list, err := h.streams.StreamHealth(c.Request().Context(), StaffOf(c).OrganizationID)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, s := range list {
			p.Rows = append(p.Rows, streamRow(s, now))
		}
	}
	return h.Render(c, http.StatusOK, pages.Streams(p))
}

// streamRow is a stream as the streams page shows it, its backlog's age
// at now.
func streamRow(s ssf.StreamHealth, now time.Time) pages.StreamRow {
	r := pages.StreamRow{ID: s.ID, Delivery: "poll", Endpoint: s.Delivery.EndpointURL, Status: string(s.Status), Reason: s.StatusReason,
		LastError: s.LastError, Pending: s.Pending}
	if s.Delivery.Method == ssf.DeliveryPush {
		r.Delivery = "push"
	}
	if s.Pending > 0 {
		r.OldestAge = Age(now.Sub(s.OldestPending))
	}
	return r
}

// Age says how long a while is, to the second under an hour.
func Age(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	if d >= time.Hour {
		return d.Round(time.Minute).String()
	}
	return d.String()
}
