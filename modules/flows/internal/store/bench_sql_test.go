package store

import (
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/benchsql"
)

// TestBenchmarkScriptsRunTheStoresStatements: the pgbench scripts of
// cmd/flowbench run this store's statements as flowd sends them, with
// pgbench's variables and values for the parameters. A statement changed
// here fails until its scripts follow; the failure says how they read.
func TestBenchmarkScriptsRunTheStoresStatements(t *testing.T) {
	t.Parallel()
	// pgbench draws ids as random numbers: a flow's and its tasks'.
	id := func(v string) string {
		return `(lpad(to_hex(:` + v + `::bigint), 16, '0') || lpad(to_hex(:f2::bigint), 16, '0'))::uuid`
	}
	// A create's columns as the scripts write them; the flow's webhook URL
	// is the script's.
	created := func(webhookURL string) []string {
		values := map[string]string{
			"id": id("f1"), "organization_id": ":writeorg", "reference_name": "'flowbench'", "sandbox": "false",
			"pii_key_id": "'" + SubjectSealed + "'", "national_id_sealed": ":nisealed", "national_id_hmac": ":nihmac",
			"last_name_sealed": ":lnsealed", "redirect_url": ":redirect", "webhook_url": webhookURL,
			"organization_number": "''", "process_instance_id": "gen_random_uuid()", "flow_definition_id": "'consent'",
			"flow_definition_version": "1", "version_tag": "null", "parameters": "null", "created_by": ":client",
			"consent_status": "'Unopened'", "process_status": "'active'",
			"subject_key_id": id("k1"),
		}
		// The organization, its reference prefix, and 30 days in microseconds.
		args := []string{":writeorg", "'PGB'", "2592000000000"}
		for _, c := range createColumns {
			v, ok := values[c.name]
			if !ok {
				t.Fatalf("the create's column %s has no value in the pgbench scripts: give it one here and there", c.name)
			}
			args = append(args, v)
		}
		// The flow's subject key, which the insert confirms.
		return append(args, id("k1"))
	}
	// Each create is of a new person: their subject key is inserted in the
	// flow's round trip, sealed under the data key.
	subjectKey := []string{":writeorg", id("k1"), "sha256(:f1::text::bytea)", ":keyid", ":keysealed", ":sknisealed",
		"sha256(:k1::text::bytea)", ":pindexkey"}
	task := func(taskID, taskType, category string) []string {
		return []string{":writeorg", id(taskID), id("f1"), "'" + taskType + "'", "'" + category + "'", "'pending'"}
	}
	benchsql.Check(t, "create.sql", 2, insertSubjectKeySQL(1), subjectKey...)
	benchsql.Check(t, "create.sql", 3, insertFlowSQL, created("''")...)
	benchsql.Check(t, "create.sql", 4, insertTaskOfNewFlowSQL, task("t1", "consent", "user-task")...)
	benchsql.Check(t, "webhook.sql", 2, insertSubjectKeySQL(1), subjectKey...)
	benchsql.Check(t, "webhook.sql", 3, insertFlowSQL, created(":hookurl")...)
	benchsql.Check(t, "webhook.sql", 4, insertTaskOfNewFlowSQL, task("t1", "consent", "user-task")...)
	benchsql.Check(t, "webhook.sql", 5, insertTaskOfNewFlowSQL, task("t2", "send-initiate-webhook", "service-task")...)

	// The shared reads' round trips start by asking for generic plans.
	for _, script := range []string{"retrieve.sql", "list_first.sql", "list_deep.sql"} {
		benchsql.Check(t, script, 0, genericPlansSQL)
	}
	// A retrieve reads one of the seeded flows.
	seeded := `('00000000-0000-7000-8000-' || lpad(to_hex(:n::bigint), 12, '0'))`
	benchsql.Check(t, "retrieve.sql", 1, flowByIDSQL, ":org", seeded+"::uuid")
	benchsql.Check(t, "retrieve.sql", 2, openIncidentsSQL, ":org", "array["+seeded+"]")

	first, _ := listSQL(ListQuery{OrganizationID: "org", Limit: 10}, time.Time{})
	benchsql.Check(t, "list_first.sql", 1, first, ":org", "false")
	// The deep page's cursor is one whose position flowd remembers.
	deep, _ := listSQL(ListQuery{OrganizationID: "org", Limit: 10, CursorID: "cursor"}, time.Now())
	benchsql.Check(t, "list_deep.sql", 1, deep, ":org", "false", ":cursor", ":cursor_at")
}
