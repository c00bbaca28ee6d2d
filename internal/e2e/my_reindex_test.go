package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
)

// TestFlowsReindexCommand: `flowd flows reindex` indexes the keys of
// people, which hold the blind index of their flows, made without one,
// printing its progress; a second run finds nothing left. (The flows of
// the module test it on flows made before those keys, batch by batch.)
func TestFlowsReindexCommand(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	_, api := createOrgAndClient(t, in, "Reindex Bank", "RIX")
	for range 3 {
		if resp := call(t, api, "POST", in.URL+"/api/flows", `{"nationalId":"`+rightID+`","lastName":"Nordmann",`+
			`"redirectUrl":"https://bank.example/done"}`, nil); resp.StatusCode != 201 {
			t.Fatalf("create: %d", resp.StatusCode)
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var indexed int
	if err := conn.QueryRow(ctx, `select count(*) from subject_keys where person_index is not null`).Scan(&indexed); err != nil || indexed != 1 {
		t.Fatalf("the person's key indexed: %d, %v; want 1", indexed, err)
	}
	// As a key made before there was an index.
	if _, err := conn.Exec(ctx, `update subject_keys set person_index = null, person_index_key = null`); err != nil {
		t.Fatal(err)
	}
	out := in.CLI(t, "", "flows", "reindex", "--batch", "2")
	for _, want := range []string{"1 people's keys and older flows to index under key version", "indexed 1 of 1",
		"Every person's key and flow is indexed"} {
		if !strings.Contains(out, want) {
			t.Errorf("flows reindex printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, rightID) {
		t.Errorf("flows reindex printed a national id:\n%s", out)
	}
	if err := conn.QueryRow(ctx, `select count(*) from subject_keys where person_index is not null`).Scan(&indexed); err != nil || indexed != 1 {
		t.Fatalf("after the re-index %d keys are indexed, %v; want 1", indexed, err)
	}
	if again := in.CLI(t, "", "flows", "reindex"); !strings.Contains(again, "0 people's keys and older flows to index") || strings.Contains(again, "indexed 1") {
		t.Errorf("a second run:\n%s", again)
	}
}
