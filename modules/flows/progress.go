package flows

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// MarkOpenedTx locks the organization's flow in tx and moves it from
// Unopened to Opened (flow.opened) while it can still be answered;
// otherwise it changes nothing. It returns the flow as it then is.
// ErrNotFound.
func (m *Manager) MarkOpenedTx(ctx context.Context, tx database.Tx, organizationID, flowID string) (Flow, error) {
	row, err := lockedFlow(ctx, tx, organizationID, flowID)
	if err != nil {
		return Flow{}, err
	}
	now := time.Now()
	if row.ConsentStatus != string(Unopened) || row.ProcessStatus != string(Active) || !now.Before(row.ExpiresAt) {
		return m.toFlow(row)
	}
	row.ConsentStatus, row.OpenedAt = string(Opened), &now
	if err := store.SaveState(ctx, tx, &row); err != nil {
		return Flow{}, err
	}
	f, err := m.toFlow(row)
	if err != nil {
		return Flow{}, err
	}
	return f, m.publishTx(ctx, tx, f, webhooks.FlowOpened)
}

func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// lockedFlow reads an organization's flow, locked for update in tx. ErrNotFound.
func lockedFlow(ctx context.Context, tx database.Tx, organizationID, flowID string) (store.Flow, error) {
	return lockedFlowIfMatch(ctx, tx, organizationID, flowID, etag.Any)
}

// lockedFlowIfMatch is lockedFlow for a write of the API: it checks cond
// against the flow's ETag under the lock, so that no other change comes
// between the check and the write. ErrNotFound, apperr PreconditionFailed.
func lockedFlowIfMatch(ctx context.Context, tx database.Tx, organizationID, flowID string, cond etag.IfMatch) (store.Flow, error) {
	if !ids.Valid(flowID) || organizationID == "" {
		return store.Flow{}, ErrNotFound
	}
	row, err := store.GetFlow(ctx, tx, organizationID, flowID, true)
	if err != nil {
		return row, notFound(err)
	}
	return row, cond.Check(Flow{Version: row.Version}.ETag())
}

// ExpireDue cancels up to limit active flows whose consent expired by now
// (flow.cancelled) and returns how many it cancelled. A flow another
// transaction holds is left to it.
func (m *Manager) ExpireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	due, err := store.DueForExpiry(ctx, m.pool, now, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	n := 0
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		for _, k := range due {
			row, err := store.LockDueForExpiry(ctx, tx, k, now)
			if errors.Is(err, store.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := m.cancelTx(ctx, tx, row); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// TaskReports records how a flow's webhook deliveries go: it implements
// webhooks.TaskReporter. It is separate from Manager, which needs the
// webhooks module's Publisher, so that the webhooks module, built first, can
// be started with a TaskReports on a pool of its own.
type TaskReports struct {
	pool *pgxpool.Pool
}

var _ webhooks.TaskReporter = (*TaskReports)(nil)

// NewTaskReports returns the flows module's webhooks.TaskReporter.
func NewTaskReports(pool *pgxpool.Pool) *TaskReports { return &TaskReports{pool: pool} }

// TaskSucceeded implements webhooks.TaskReporter. A task whose flow was
// deleted meanwhile is nothing to report on.
func (m *TaskReports) TaskSucceeded(ctx context.Context, organizationID, taskID string) error {
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
		if err := store.SetTaskStatus(ctx, tx, row.OrganizationID, taskID, TaskCompleted); err != nil {
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
func (m *TaskReports) TaskFailing(ctx context.Context, organizationID, taskID, message string) error {
	return m.reportTask(ctx, organizationID, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		return store.OpenIncident(ctx, tx, store.Incident{OrganizationID: row.OrganizationID, ID: ids.New(),
			FlowID: row.ID, TaskID: taskID, TaskType: task.TaskType, Message: message})
	})
}

// TaskFailed implements webhooks.TaskReporter: the task failed for good, the
// flow has errors, and an incident stays open for staff to retry.
func (m *TaskReports) TaskFailed(ctx context.Context, organizationID, taskID, message string) error {
	return m.reportTask(ctx, organizationID, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		if err := store.SetTaskStatus(ctx, tx, row.OrganizationID, taskID, TaskFailed); err != nil {
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
func (m *TaskReports) reportTask(ctx context.Context, organizationID, taskID string,
	change func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error)) error {
	if !ids.Valid(taskID) || organizationID == "" {
		return nil
	}
	task, err := store.GetTask(ctx, m.pool, organizationID, taskID)
	if errors.Is(err, store.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		row, err := store.GetFlow(ctx, tx, organizationID, task.FlowID, true)
		if errors.Is(err, store.ErrNoRows) {
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
