package flows_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// flowIDs lists the ids of fs, sorted.
func flowIDs(fs []flows.Flow) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestFlowsOfPersonFindsThemInEveryOrganization: the blind index finds a
// person's flows of two organizations whatever the formatting of the id,
// and none of another person's.
func TestFlowsOfPersonFindsThemInEveryOrganization(t *testing.T) {
	t.Parallel()
	index := nationalid.NewBlindIndex(bytes.Repeat([]byte{9}, 32), nationalid.Format{})
	b := setup(t, func(c *flows.Config) { c.PersonIndex = index })
	ctx := context.Background()
	mine := b.create(t, newFlow("12345678901"))
	otherOrg := *b
	otherOrg.caller = flows.Caller{OrganizationID: "org-b", ClientID: "client-b"}
	atB := otherOrg.create(t, newFlow("123456-78901"))
	b.create(t, newFlow("10987654321"))

	want := []string{mine.FlowID, atB.FlowID}
	slices.Sort(want)
	for _, asked := range []string{"12345678901", "123456 78901", "123456-78901"} {
		got, err := b.flows.FlowsOfPerson(ctx, asked)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(flowIDs(got), want) {
			t.Errorf("FlowsOfPerson(%q) = %v, want %v", asked, flowIDs(got), want)
		}
	}
	if got, err := b.flows.FlowsOfPerson(ctx, "55555555555"); err != nil || len(got) != 0 {
		t.Errorf("a person without flows found %v, %v", flowIDs(got), err)
	}
	// The index is kept by the person's key, not by the flow.
	var stored, onFlow []byte
	if err := b.pool.QueryRow(ctx, `select s.person_index, f.person_index from flows f
		join subject_keys s on s.organization_id = f.organization_id and s.id = f.subject_key_id where f.id = $1`,
		mine.FlowID).Scan(&stored, &onFlow); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte("12345678901")) || !bytes.Equal(stored, index.Of("12345678901")) {
		t.Errorf("the stored index is not the keyed HMAC of the id")
	}
	if onFlow != nil {
		t.Errorf("the flow keeps an index of its own: %x", onFlow)
	}
	if bytes.Equal(index.Of("12345678901"), nationalid.NewBlindIndex(bytes.Repeat([]byte{8}, 32), nationalid.Format{}).Of("12345678901")) {
		t.Error("another key gives the same index")
	}
}

// TestReindexFillsOldFlowsAndResumes: flows made without an index (before
// there was one) are found only once the re-index has run, which indexes
// each person's key once; a run stopped after a batch carries on where it
// stopped in a new run, and a new key makes every key stale again.
func TestReindexFillsOldFlowsAndResumes(t *testing.T) {
	t.Parallel()
	old := setup(t) // no index: the flows of an earlier flowd
	ctx := context.Background()
	var made []string
	for range 5 {
		made = append(made, old.create(t, newFlow("12345678901")).FlowID)
	}
	old.create(t, newFlow("10987654321"))
	slices.Sort(made)
	index := nationalid.NewBlindIndex(bytes.Repeat([]byte{9}, 32), nationalid.Format{})
	b := instance(old.pool, old.sealer, func(c *flows.Config) { c.PersonIndex = index })
	if got, _ := b.flows.FlowsOfPerson(ctx, "12345678901"); len(got) != 0 {
		t.Fatalf("flows without an index were found: %v", flowIDs(got))
	}

	first := rekey.NewReindexer(b.pool, b.sealer, index, nationalid.Format{})
	if n, err := first.Remaining(ctx); err != nil || n != 2 {
		t.Fatalf("Remaining = %d, %v; want 2 (the keys of two people)", n, err)
	}
	if n, err := first.ReindexBatch(ctx, 1); err != nil || n != 1 {
		t.Fatalf("first batch: %d, %v", n, err)
	}
	// Interrupted: a new run finds only what is left.
	second := rekey.NewReindexer(b.pool, b.sealer, index, nationalid.Format{})
	if n, _ := second.Remaining(ctx); n != 1 {
		t.Fatalf("after one batch of 1, %d remain, want 1", n)
	}
	total := 0
	for {
		n, err := second.ReindexBatch(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != 1 {
		t.Errorf("the resumed run indexed %d, want 1", total)
	}
	got, err := b.flows.FlowsOfPerson(ctx, "12345678901")
	if err != nil || !slices.Equal(flowIDs(got), made) {
		t.Fatalf("after the re-index: %v, %v; want %v", flowIDs(got), err, made)
	}

	// A new key: every flow is stale and found again once re-indexed.
	rotated := nationalid.NewBlindIndex(bytes.Repeat([]byte{7}, 32), nationalid.Format{})
	after := instance(b.pool, b.sealer, func(c *flows.Config) { c.PersonIndex = rotated })
	if got, _ := after.flows.FlowsOfPerson(ctx, "12345678901"); len(got) != 0 {
		t.Fatalf("flows indexed under the old key were found under the new one: %v", flowIDs(got))
	}
	r := rekey.NewReindexer(b.pool, b.sealer, rotated, nationalid.Format{})
	if n, _ := r.Remaining(ctx); n != 2 {
		t.Fatalf("after a new key %d remain, want 2", n)
	}
	for n := 1; n > 0; {
		if n, err = r.ReindexBatch(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := after.flows.FlowsOfPerson(ctx, "12345678901"); !slices.Equal(flowIDs(got), made) {
		t.Fatalf("after re-indexing under the new key: %v", flowIDs(got))
	}
	if strings.Contains(b.logs.String(), "12345678901") {
		t.Error("the log holds a national id")
	}
}
