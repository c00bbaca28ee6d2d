package flows_test

import (
	"context"
	"testing"

	"github.com/flowd/flowd/modules/flows"
)

// deliveryTask returns the id of the flow's task that delivers its flow.created event.
func (b *bundle) deliveryTask(t *testing.T, flowID string) string {
	t.Helper()
	var id string
	if err := b.pool.QueryRow(context.Background(), `select task_id from test_events where flow_id = $1 and kind = 'flow.created'`, flowID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestWebhookTaskReportsOpenAndResolveIncidents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.create(t, newFlow("ID-1")).FlowID
	taskID := b.deliveryTask(t, id)
	const msg = "hooks.example: 502 Bad Gateway"
	for range 2 {
		if err := b.reports.TaskFailing(ctx, b.caller.OrganizationID, taskID, msg); err != nil {
			t.Fatal(err)
		}
	}
	f := b.get(t, id)
	if f.Version != 2 || f.HasErrors || len(f.Incidents) != 1 {
		t.Fatalf("after failing twice: version %d, errors %v, incidents %+v", f.Version, f.HasErrors, f.Incidents)
	}
	if inc := f.Incidents[0]; inc.TaskID != taskID || inc.Message != msg || inc.TaskType != flows.TaskSendInitiateWebhook || inc.ID == "" {
		t.Fatalf("incident %+v", inc)
	}
	if err := b.reports.TaskSucceeded(ctx, b.caller.OrganizationID, taskID); err != nil {
		t.Fatal(err)
	}
	if f := b.get(t, id); f.Version != 3 || len(f.Incidents) != 0 {
		t.Fatalf("after success: version %d, incidents %+v", f.Version, f.Incidents)
	}
	if err := b.reports.TaskFailed(ctx, b.caller.OrganizationID, taskID, "hooks.example: 410 Gone"); err != nil {
		t.Fatal(err)
	}
	if f := b.get(t, id); f.Version != 4 || !f.HasErrors || len(f.Incidents) != 1 {
		t.Fatalf("after failing for good: version %d, errors %v, incidents %+v", f.Version, f.HasErrors, f.Incidents)
	}
	if n := b.count(t, `select count(*) from flow_tasks where id = $1 and status = 'failed'`, taskID); n != 1 {
		t.Fatal("the task is not failed")
	}
	// A retry by staff that succeeds clears the flow's errors.
	if err := b.reports.TaskSucceeded(ctx, b.caller.OrganizationID, taskID); err != nil {
		t.Fatal(err)
	}
	if f := b.get(t, id); f.Version != 5 || f.HasErrors || len(f.Incidents) != 0 {
		t.Fatalf("after a retry succeeded: version %d, errors %v, incidents %+v", f.Version, f.HasErrors, f.Incidents)
	}
	// Reports about unknown or deleted tasks, or naming another
	// organization, are nothing to act on.
	for _, bad := range []struct{ org, task string }{
		{b.caller.OrganizationID, "nope"},
		{b.caller.OrganizationID, "00000000-0000-0000-0000-000000000000"},
		{"org-b", taskID},
		{"", taskID},
	} {
		if err := b.reports.TaskFailed(ctx, bad.org, bad.task, "x"); err != nil {
			t.Fatalf("task %q of %q: %v", bad.task, bad.org, err)
		}
	}
	if f := b.get(t, id); f.Version != 5 || f.HasErrors || len(f.Incidents) != 0 {
		t.Fatalf("after reports on tasks it does not have: version %d, errors %v, incidents %+v", f.Version, f.HasErrors, f.Incidents)
	}
}

// TestAFirstDeliveryThatSucceedsChangesOnlyItsTask: the common case
// completes the task and leaves the flow's version alone.
func TestAFirstDeliveryThatSucceedsChangesOnlyItsTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.create(t, newFlow("ID-1")).FlowID
	taskID := b.deliveryTask(t, id)
	if err := b.reports.TaskSucceeded(context.Background(), "org-b", taskID); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `select count(*) from flow_tasks where id = $1 and status = 'completed'`, taskID); n != 0 {
		t.Fatal("a report naming another organization completed the task")
	}
	if err := b.reports.TaskSucceeded(context.Background(), b.caller.OrganizationID, taskID); err != nil {
		t.Fatal(err)
	}
	if f := b.get(t, id); f.Version != 1 || f.HasErrors || len(f.Incidents) != 0 {
		t.Fatalf("after a clean delivery: version %d, errors %v, incidents %+v", f.Version, f.HasErrors, f.Incidents)
	}
	if n := b.count(t, `select count(*) from flow_tasks where id = $1 and status = 'completed'`, taskID); n != 1 {
		t.Fatal("the task is not completed")
	}
}
