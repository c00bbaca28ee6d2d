package console

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// HandleConsoleDeliveries handles "GET /console/webhooks/deliveries": the
// organization's deliveries not delivered, queued and failing, with a retry
// for admins. It is what River's own UI would show an operator, for one
// organization.
func (h *Handler) HandleConsoleDeliveries(c echo.Context) error {
	b, err := h.webhooks.Backlog(c.Request().Context(), StaffOf(c).OrganizationID)
	if err != nil {
		return err
	}
	p := pages.DeliveriesPage{Frame: h.Frame(c, "webhooks", "Webhook deliveries"), Pending: b.Pending, Retrying: b.Retrying,
		Failed: b.Failed, OldestPending: TimePtr(b.OldestPending, ""), Shown: webhooks.BacklogShown}
	for _, d := range b.Deliveries {
		row := pages.DeliveryRow{ID: d.ID, Event: string(d.Type), To: d.URL, State: d.State, Attempts: d.Attempts,
			LastError: OrDash(d.LastError), Created: Time(d.CreatedAt), Test: d.Test}
		// Every event of a flow links it, but the last one of a deleted flow.
		if d.FlowID != "" && d.Type != webhooks.FlowDeleted {
			row.FlowURL = c.Echo().Reverse("console.flow", d.FlowID)
		}
		p.Rows = append(p.Rows, row)
	}
	return h.Render(c, http.StatusOK, pages.Deliveries(p))
}

// HandleConsoleRetryDelivery handles "POST
// /console/webhooks/deliveries/:id/retry" (admins): the delivery is sent
// again now, and the retry is in the audit log in its transaction.
func (h *Handler) HandleConsoleRetryDelivery(c echo.Context) error {
	err := h.webhooks.RetryDelivery(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"),
		func(ctx context.Context, tx database.Tx, d webhooks.BacklogDelivery) error {
			action, target := identity.AuditTaskRetry, "task "+d.TaskID
			if d.EndpointID != "" {
				action, target = identity.AuditEventRedeliver, d.EventID
			}
			return httpkit.AuditFailed(h.audit.RecordAuditTx(ctx, tx, auditEntry(c, action, target, string(d.Type)+" event, delivery "+d.ID)))
		})
	switch {
	case errors.Is(err, webhooks.ErrNotFound), errors.Is(err, webhooks.ErrEndpointNotFound):
		return apperr.New(apperr.NotFound, "No such delivery to retry: it may have been delivered, or its flow or endpoint deleted.")
	case errors.Is(err, webhooks.ErrNothingToRedeliver):
		return apperr.New(apperr.Conflict, "This delivery cannot be sent again.")
	case err != nil:
		return err
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks/deliveries", "delivery_retried", ""))
}
