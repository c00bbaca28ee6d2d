package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/flowdtest"
)

// TestFlowsReindexCommand: `flowd flows reindex` indexes flows made without
// a blind index, printing its progress batch by batch, and a second run
// finds nothing left.
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
	if err := conn.QueryRow(ctx, `select count(*) from flows where person_index is not null`).Scan(&indexed); err != nil || indexed != 3 {
		t.Fatalf("new flows indexed: %d, %v; want 3", indexed, err)
	}
	// As flows made before there was an index.
	if _, err := conn.Exec(ctx, `update flows set person_index = null, person_index_key = null`); err != nil {
		t.Fatal(err)
	}
	out := in.CLI(t, "", "flows", "reindex", "--batch", "2")
	for _, want := range []string{"3 flows to index under key version", "indexed 2 of 3 flows", "indexed 3 of 3 flows",
		"Every flow is indexed"} {
		if !strings.Contains(out, want) {
			t.Errorf("flows reindex printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, rightID) {
		t.Errorf("flows reindex printed a national id:\n%s", out)
	}
	if err := conn.QueryRow(ctx, `select count(*) from flows where person_index is not null`).Scan(&indexed); err != nil || indexed != 3 {
		t.Fatalf("after the re-index %d flows are indexed, %v; want 3", indexed, err)
	}
	if again := in.CLI(t, "", "flows", "reindex"); !strings.Contains(again, "0 flows to index") || strings.Contains(again, "indexed 1") {
		t.Errorf("a second run:\n%s", again)
	}
}
