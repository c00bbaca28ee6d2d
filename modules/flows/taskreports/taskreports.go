// Package taskreports records on the flows module's flows how their webhook
// deliveries go, as the webhooks module reports them: tasks completed or
// failed, incidents opened and resolved, and the flow's errors.
package taskreports

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// Reporter records how a flow's webhook deliveries go: it implements
// webhooks.TaskReporter. It is separate from flows.Manager, which needs the
// webhooks module's Publisher, so that the webhooks module, built first, can
// be started with a Reporter on a pool of its own.
type Reporter struct {
	pool *pgxpool.Pool
}

var _ webhooks.TaskReporter = (*Reporter)(nil)

// New returns the flows module's webhooks.TaskReporter.
func New(pool *pgxpool.Pool) *Reporter { return &Reporter{pool: pool} }

// TaskSucceeded implements webhooks.TaskReporter. A task whose flow was
// deleted meanwhile is nothing to report on.
func (m *Reporter) TaskSucceeded(ctx context.Context, organizationID, taskID string) error {
	if !ids.Valid(taskID) || organizationID == "" {
		return nil
	}
	// Nearly every delivery succeeds at the first attempt: the task has no
	// open incident and its flow no errors, so completing the task changes
	// nothing else and one statement does it. Anything else takes the full
	// path below, which locks the flow.
	done, err := store.CompleteCleanTask(ctx, m.pool, organizationID, taskID)
	if err != nil || done {
		return err
	}
	return m.reportTask(ctx, organizationID, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		if err := store.SetTaskStatus(ctx, tx, row.OrganizationID, taskID, flows.TaskCompleted); err != nil {
			return false, err
		}
		resolved, err := store.ResolveIncidents(ctx, tx, row.OrganizationID, taskID)
		if err != nil {
			return false, err
		}
		// A task retried by staff after failing for good may clear the flow's errors.
		failed, err := store.AnyTaskFailed(ctx, tx, row.OrganizationID, row.ID)
		if err != nil {
			return false, err
		}
		changed := resolved || row.HasErrors != failed
		row.HasErrors = failed
		return changed, nil
	})
}

// TaskFailing implements webhooks.TaskReporter: the first failure report
// opens the task's incident; later ones leave it as it is.
func (m *Reporter) TaskFailing(ctx context.Context, organizationID, taskID, message string) error {
	return m.reportTask(ctx, organizationID, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		return store.OpenIncident(ctx, tx, store.Incident{OrganizationID: row.OrganizationID, ID: ids.New(),
			FlowID: row.ID, TaskID: taskID, TaskType: task.TaskType, Message: message})
	})
}

// TaskFailed implements webhooks.TaskReporter: the task failed for good, the
// flow has errors, and an incident stays open for staff to retry.
func (m *Reporter) TaskFailed(ctx context.Context, organizationID, taskID, message string) error {
	return m.reportTask(ctx, organizationID, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		if err := store.SetTaskStatus(ctx, tx, row.OrganizationID, taskID, flows.TaskFailed); err != nil {
			return false, err
		}
		opened, err := store.OpenIncident(ctx, tx, store.Incident{OrganizationID: row.OrganizationID, ID: ids.New(),
			FlowID: row.ID, TaskID: taskID, TaskType: task.TaskType, Message: message})
		if err != nil {
			return false, err
		}
		changed := opened || !row.HasErrors
		row.HasErrors = true
		return changed, nil
	})
}

// reportTask runs change on an organization's task's flow, locked, and
// bumps the flow's version when change reports that the flow changed. The
// task is read before the transaction: a task never moves to another flow,
// and one deleted meanwhile, or of another organization, has no flow to
// lock and nothing to report.
func (m *Reporter) reportTask(ctx context.Context, organizationID, taskID string,
	change func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error)) error {
	if !ids.Valid(taskID) || organizationID == "" {
		return nil
	}
	task, err := store.GetTask(ctx, m.pool, organizationID, taskID)
	if errors.Is(err, database.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		row, err := store.GetFlow(ctx, tx, organizationID, task.FlowID, true)
		if errors.Is(err, database.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		changed, err := change(tx, &row, task)
		if err != nil || !changed {
			return err
		}
		return store.SaveState(ctx, tx, &row)
	})
}
