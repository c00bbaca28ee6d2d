package flows

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// ForConsentTx implements Progress.
func (m *Manager) ForConsentTx(ctx context.Context, tx database.Tx, flowID string) (Flow, error) {
	if !validID(flowID) {
		return Flow{}, ErrNotFound
	}
	row, err := store.GetFlow(ctx, tx, "", flowID, true)
	if err != nil {
		return Flow{}, notFound(err)
	}
	return m.toFlow(row)
}

// MarkOpenedTx implements Progress.
func (m *Manager) MarkOpenedTx(ctx context.Context, tx database.Tx, flowID string) (Flow, error) {
	if !validID(flowID) {
		return Flow{}, ErrNotFound
	}
	row, err := store.GetFlow(ctx, tx, "", flowID, true)
	if err != nil {
		return Flow{}, notFound(err)
	}
	if row.ConsentStatus != string(Unopened) || row.ProcessStatus != string(Active) || !time.Now().Before(row.ExpiresAt) {
		return m.toFlow(row)
	}
	now := time.Now()
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

// DecideTx implements Progress.
func (m *Manager) DecideTx(ctx context.Context, tx database.Tx, flowID string, accepted bool) (Flow, error) {
	if !validID(flowID) {
		return Flow{}, ErrNotFound
	}
	row, err := store.GetFlow(ctx, tx, "", flowID, true)
	if err != nil {
		return Flow{}, notFound(err)
	}
	now := time.Now()
	if row.ProcessStatus != string(Active) || !now.Before(row.ExpiresAt) {
		return Flow{}, ErrNotActive
	}
	status, event := Rejected, webhooks.FlowRejected
	if accepted {
		status, event = Accepted, webhooks.FlowAccepted
	}
	row.ConsentStatus, row.ProcessStatus, row.DecidedAt = string(status), string(Completed), &now
	if row.OpenedAt == nil {
		row.OpenedAt = &now
	}
	if err := store.SaveState(ctx, tx, &row); err != nil {
		return Flow{}, err
	}
	if err := store.SetTasksStatus(ctx, tx, flowID, TaskConsent, TaskPending, TaskCompleted); err != nil {
		return Flow{}, err
	}
	f, err := m.toFlow(row)
	if err != nil {
		return Flow{}, err
	}
	return f, m.publishTx(ctx, tx, f, event)
}

// ExpireDue implements Progress.
func (m *Manager) ExpireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		ids, err := store.DueForExpiry(ctx, tx, now, limit)
		if err != nil {
			return err
		}
		for _, id := range ids {
			row, err := store.GetFlow(ctx, tx, "", id, true)
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
// webhooks module's Publisher, so that the webhooks module can be built first
// with a TaskReports and then handed to New; Manager offers the same methods.
type TaskReports struct {
	pool *pgxpool.Pool
}

var _ webhooks.TaskReporter = (*TaskReports)(nil)

// NewTaskReports returns the flows module's webhooks.TaskReporter.
func NewTaskReports(pool *pgxpool.Pool) *TaskReports { return &TaskReports{pool: pool} }

// TaskSucceeded implements webhooks.TaskReporter. A task whose flow was
// deleted meanwhile is nothing to report on.
func (m *TaskReports) TaskSucceeded(ctx context.Context, taskID string) error {
	if !validID(taskID) {
		return nil
	}
	// Nearly every delivery succeeds at the first attempt: the task has no
	// open incident and its flow no errors, so completing the task changes
	// nothing else and one statement does it. Anything else takes the full
	// path below, which locks the flow.
	done, err := store.CompleteCleanTask(ctx, m.pool, taskID)
	if err != nil || done {
		return err
	}
	return m.reportTask(ctx, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		if err := store.SetTaskStatus(ctx, tx, taskID, TaskCompleted); err != nil {
			return false, err
		}
		resolved, err := store.ResolveIncidents(ctx, tx, taskID)
		if err != nil {
			return false, err
		}
		// A task retried by staff after failing for good may clear the flow's errors.
		failed, err := store.AnyTaskFailed(ctx, tx, row.ID)
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
func (m *TaskReports) TaskFailing(ctx context.Context, taskID, message string) error {
	return m.reportTask(ctx, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		return store.OpenIncident(ctx, tx, store.Incident{ID: newID(), FlowID: row.ID, TaskID: taskID,
			TaskType: task.TaskType, Message: message})
	})
}

// TaskFailed implements webhooks.TaskReporter: the task failed for good, the
// flow has errors, and an incident stays open for staff to retry.
func (m *TaskReports) TaskFailed(ctx context.Context, taskID, message string) error {
	return m.reportTask(ctx, taskID, func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error) {
		if err := store.SetTaskStatus(ctx, tx, taskID, TaskFailed); err != nil {
			return false, err
		}
		opened, err := store.OpenIncident(ctx, tx, store.Incident{ID: newID(), FlowID: row.ID, TaskID: taskID,
			TaskType: task.TaskType, Message: message})
		if err != nil {
			return false, err
		}
		changed := opened || !row.HasErrors
		row.HasErrors = true
		return changed, nil
	})
}

// reportTask runs change on a task's flow, locked, and bumps the flow's
// version when change reports that the flow changed.
func (m *TaskReports) reportTask(ctx context.Context, taskID string, change func(tx pgx.Tx, row *store.Flow, task store.Task) (bool, error)) error {
	if !validID(taskID) {
		return nil
	}
	return database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		task, err := store.GetTask(ctx, tx, taskID)
		if errors.Is(err, store.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		row, err := store.GetFlow(ctx, tx, "", task.FlowID, true)
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
