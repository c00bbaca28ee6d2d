package store

import (
	"context"

	"github.com/flowd/flowd/internal/database"
)

// InsertTestEvent stores a test event and its one delivery, to an endpoint.
func InsertTestEvent(ctx context.Context, db database.Querier, ev StoredEvent, d Event, endpointID string) error {
	_, err := db.Exec(ctx, `
		with event as (
			insert into events (organization_id, id, type, body, test) values ($1, $2, $3, $4, true))
		insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, job_id, event_id, endpoint_id, test)
		values ($5, $1, '', '', $3, $6, $4, $7, $2, $8, true)`,
		ev.OrganizationID, ev.ID, ev.Type, ev.Body, d.ID, d.URL, d.JobID, endpointID)
	return err
}
