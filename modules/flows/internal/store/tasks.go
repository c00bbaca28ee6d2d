package store

import (
	"context"
	"time"
)

// Task is a row of flow_tasks.
type Task struct {
	OrganizationID string    `db:"organization_id"`
	ID             string    `db:"id"`
	FlowID         string    `db:"flow_id"`
	TaskType       string    `db:"task_type"`
	TaskCategory   string    `db:"task_category"`
	Status         string    `db:"status"`
	CreatedAt      time.Time `db:"created_at"`
	UpdatedAt      time.Time `db:"updated_at"`
}

var (
	taskRows      = newTable[Task]()
	insertTaskSQL = `insert into flow_tasks (organization_id, id, flow_id, task_type, task_category, status)
	values ($1, $2, $3, $4, $5, $6) returning created_at, updated_at`

	// insertTaskOfNewFlowSQL is insertTaskSQL in the batch of a flow's
	// insert that may insert nothing: then it inserts nothing either.
	insertTaskOfNewFlowSQL = `insert into flow_tasks (organization_id, id, flow_id, task_type, task_category, status)
	select $1, $2, $3, $4, $5, $6 where exists (select 1 from flows where organization_id = $1 and id = $3)
	returning created_at, updated_at`
)

// InsertTask inserts t with the database clock's times, which it reads
// into t.
func InsertTask(ctx context.Context, db DB, t *Task) error {
	rows, err := db.Query(ctx, insertTaskSQL, t.OrganizationID, t.ID, t.FlowID, t.TaskType, t.TaskCategory, t.Status)
	return taskRows.fill(t, rows, err)
}

// Tasks lists a flow's tasks, oldest first.
func Tasks(ctx context.Context, db DB, organizationID, flowID string) ([]Task, error) {
	return taskRows.all(db.Query(ctx, `select `+taskRows.columns+`
		from flow_tasks where organization_id = $1 and flow_id = $2 order by created_at, id`, organizationID, flowID))
}

// GetTask returns an organization's task. database.ErrNotFound.
func GetTask(ctx context.Context, db DB, organizationID, id string) (Task, error) {
	return taskRows.one(db.Query(ctx, `select `+taskRows.columns+` from flow_tasks where organization_id = $1 and id = $2`,
		organizationID, id))
}

// SetTaskStatus moves a task to status.
func SetTaskStatus(ctx context.Context, db DB, organizationID, id, status string) error {
	_, err := db.Exec(ctx, `update flow_tasks set status = $3, updated_at = now()
		where organization_id = $1 and id = $2 and status <> $3`, organizationID, id, status)
	return err
}

// CompleteCleanTask completes an organization's task that is not completed
// yet when it has no open incident and its flow has no errors, the case in
// which completing it changes nothing else about the flow; it reports
// whether it did. Every table it reads is named by the organization, so
// that on Citus the statement runs on the organization's node.
func CompleteCleanTask(ctx context.Context, db DB, organizationID, id string) (bool, error) {
	tag, err := db.Exec(ctx, `update flow_tasks t set status = 'completed', updated_at = now()
		where t.organization_id = $1 and t.id = $2 and t.status <> 'completed'
		and not exists (select 1 from flow_incidents i
			where i.organization_id = $1 and i.task_id = t.id and i.resolved_at is null)
		and not exists (select 1 from flows f
			where f.organization_id = $1 and f.id = t.flow_id and f.has_errors)
		and not exists (select 1 from flow_tasks o
			where o.organization_id = $1 and o.flow_id = t.flow_id and o.status = 'failed')`, organizationID, id)
	return tag.RowsAffected() == 1, err
}

// SetTasksStatus moves a flow's tasks of taskType from one status to another.
func SetTasksStatus(ctx context.Context, db DB, organizationID, flowID, taskType, from, to string) error {
	_, err := db.Exec(ctx, `update flow_tasks set status = $5, updated_at = now()
		where organization_id = $1 and flow_id = $2 and task_type = $3 and status = $4`,
		organizationID, flowID, taskType, from, to)
	return err
}

// AnyTaskFailed reports whether a task of the flow failed for good.
func AnyTaskFailed(ctx context.Context, db DB, organizationID, flowID string) (bool, error) {
	var failed bool
	err := db.QueryRow(ctx, `select exists (select 1 from flow_tasks
		where organization_id = $1 and flow_id = $2 and status = 'failed')`, organizationID, flowID).Scan(&failed)
	return failed, err
}

// Incident is an open row of flow_incidents.
type Incident struct {
	OrganizationID string    `db:"organization_id"`
	ID             string    `db:"id"`
	FlowID         string    `db:"flow_id"`
	TaskID         string    `db:"task_id"`
	TaskType       string    `db:"task_type"`
	Message        string    `db:"message"`
	OpenedAt       time.Time `db:"opened_at"`
}

// OpenIncident opens inc unless its task has an open one; it reports whether it did.
func OpenIncident(ctx context.Context, db DB, inc Incident) (bool, error) {
	tag, err := db.Exec(ctx, `insert into flow_incidents (organization_id, id, flow_id, task_id, task_type, message)
		values ($1, $2, $3, $4, $5, $6) on conflict (organization_id, task_id) where resolved_at is null do nothing`,
		inc.OrganizationID, inc.ID, inc.FlowID, inc.TaskID, inc.TaskType, inc.Message)
	return tag.RowsAffected() == 1, err
}

// ResolveIncidents resolves a task's open incident and reports whether there was one.
func ResolveIncidents(ctx context.Context, db DB, organizationID, taskID string) (bool, error) {
	tag, err := db.Exec(ctx, `update flow_incidents set resolved_at = now()
		where organization_id = $1 and task_id = $2 and resolved_at is null`, organizationID, taskID)
	return tag.RowsAffected() > 0, err
}

// OpenIncidents lists the open incidents of an organization's flowIDs, oldest first.
func OpenIncidents(ctx context.Context, db DB, organizationID string, flowIDs []string) ([]Incident, error) {
	return incidentRows.all(db.Query(ctx, openIncidentsSQL, organizationID, flowIDs))
}

// openIncidentsSQL takes the flow ids as text[]: pgx writes a []string as
// text[] directly, while as uuid[] it first fails a binary encoding and
// builds an error for every element on each call.
var (
	incidentRows     = newTable[Incident]()
	openIncidentsSQL = `select ` + incidentRows.columns + `
	from flow_incidents where organization_id = $1 and flow_id = any($2::text[]::uuid[]) and resolved_at is null
	order by opened_at, id`
)
