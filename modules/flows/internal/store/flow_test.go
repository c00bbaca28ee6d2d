package store

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/fieldtest"
)

// TestEveryFlowFieldIsStored follows every field of Flow through the
// statements that write and read it: each field a write tag names is
// stored by that write and read back as written, and each other field is
// set by the database once the flow has gone through every change the
// store makes. A column a statement forgot, or one that nothing writes,
// leaves its field zero and fails here; a field of no column fails the
// first read.
func TestEveryFlowFieldIsStored(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var fill fieldtest.Filler
	// Values the table's types and checks ask for; the filler makes the rest.
	given := map[string]any{
		"ID": "00000000-0000-7000-8000-00000000f10e", "OrganizationID": "org-a",
		"ProcessInstanceID": "00000000-0000-4000-8000-0000000000aa",
		"SubjectKeyID":      "00000000-0000-7000-8000-00000000005c",
		"ConsentStatus":     "Accepted", "ProcessStatus": "completed", "WithdrawnBy": "individual",
		// In the past, so that ExpireAcceptance sets what it sets.
		"ValidUntil": time.Now().Add(-time.Hour).Truncate(time.Microsecond),
	}
	var written Flow
	fill.Fill(t, &written, given)

	// The create stores its columns, and the subject key it is sealed
	// under, which the reads read with the flow (the writes do not).
	key := SubjectKey{OrganizationID: "org-a", ID: *written.SubjectKeyID, Subject: []byte("subject"), KeyID: "k",
		KeySealed: []byte("sealed")}
	f := Flow{}
	copyWrites(&f, &written, createColumns)
	if err := InsertNumberedFlow(ctx, pool, &f, key, [][]byte{key.Subject}, "REF", time.Hour); err != nil {
		t.Fatal(err)
	}
	f.SubjectKeySealed = key.KeySealed
	stored := readBack(t, pool, f)
	checkWritten(t, "InsertNumberedFlow", stored, written, createColumns)

	// SaveState stores its columns, and leaves the create's.
	copyWrites(&f, &written, saveColumns)
	if err := SaveState(ctx, pool, &f); err != nil {
		t.Fatal(err)
	}
	stored = readBack(t, pool, f)
	checkWritten(t, "SaveState", stored, written, append(saveColumns, createColumns...))

	// What the database sets: a receipt and a use counted, the expiry
	// notice claimed, the acceptance expired.
	if err := InsertAttachment(ctx, pool, &Attachment{OrganizationID: f.OrganizationID, ID: "00000000-0000-7000-8000-0000000000a1",
		FlowID: f.ID, Kind: "consent-receipt", ContentType: "application/jwt", Body: "x.y.z"}); err != nil {
		t.Fatal(err)
	}
	// The use counts as of a time its consent was in force.
	inForce := written.ValidUntil.Add(-time.Minute)
	use := UseCount{Use: &Use{OrganizationID: f.OrganizationID, ID: "00000000-0000-7000-8000-0000000000b1",
		FlowID: f.ID, ActionSealed: []byte("sealed"), DataCategories: []string{}, UsedAt: inForce, RecordedBy: "client-a"},
		Now: inForce, KeyID: written.SubjectKeyID}
	if err := InsertUses(ctx, pool, []*UseCount{&use}, 0); err != nil || !use.Counted {
		t.Fatalf("InsertUses counted the use: %v, error %v", use.Counted, err)
	}
	// The notice is claimed within the validity, and the validity then ends.
	soon := time.Now().Add(time.Hour)
	if f.ValidUntil = &soon; SaveState(ctx, pool, &f) != nil {
		t.Fatal("SaveState of a validity to come")
	}
	if _, err := ClaimExpiringNotice(ctx, pool, f.OrganizationID, f.ID, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if f.ValidUntil = written.ValidUntil; SaveState(ctx, pool, &f) != nil {
		t.Fatal("SaveState of the validity ended")
	}
	// A flow made before subject keys is indexed by the re-index.
	if err := SetPersonIndexes(ctx, pool, []Indexed{{Flow: SealedFlow{OrganizationID: f.OrganizationID, ID: f.ID, KeyID: f.PIIKeyID},
		Index: []byte("index")}}, "version"); err != nil {
		t.Fatal(err)
	}
	expired, err := ExpireAcceptance(ctx, pool, f.OrganizationID, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range fieldtest.Fields(readBack(t, pool, expired)) {
		if field.Value.IsZero() {
			t.Errorf("Flow.%s is zero after every change the store makes: no statement writes its column", field.Path)
		}
	}

	// A list's row is the same flow's columns.
	page, _, err := NewSharedReads(pool, 1, nil).ListFlows(ctx, ListQuery{OrganizationID: f.OrganizationID, Archived: true, Limit: 1})
	if err != nil || len(page) != 1 {
		t.Fatalf("list: %d flows, %v", len(page), err)
	}
	whole := reflect.ValueOf(expired)
	for i, name := range summaryRows.names {
		got := reflect.ValueOf(page[0]).Field(i)
		want := whole.Field(slices.Index(flowRows.names, name))
		if got.IsZero() || !fieldtest.Equal(got, want) {
			t.Errorf("FlowSummary.%s = %v, want the flow's %s %v", reflect.TypeFor[FlowSummary]().Field(i).Name,
				reflect.Indirect(got), name, reflect.Indirect(want))
		}
	}
}

// readBack reads f's row anew, and checks that f, as the statement that
// wrote it left it, is the row as stored.
func readBack(t *testing.T, db DB, f Flow) Flow {
	t.Helper()
	stored, err := GetFlow(context.Background(), db, f.OrganizationID, f.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	kept := fieldtest.Fields(stored)
	for i, field := range fieldtest.Fields(f) {
		if !fieldtest.Equal(field.Value, kept[i].Value) {
			t.Errorf("%s is %v as the statement left it and %v as stored", field.Path,
				reflect.Indirect(field.Value), reflect.Indirect(kept[i].Value))
		}
	}
	return stored
}

// copyWrites copies the fields of cols from src to dst.
func copyWrites(dst, src *Flow, cols []column) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for _, c := range cols {
		d.Field(c.field).Set(s.Field(c.field))
	}
}

// checkWritten checks that stored holds written's fields of cols.
func checkWritten(t *testing.T, by string, stored, written Flow, cols []column) {
	t.Helper()
	s, w := reflect.ValueOf(stored), reflect.ValueOf(written)
	for _, c := range cols {
		got, want := s.Field(c.field), w.Field(c.field)
		if !fieldtest.Equal(got, want) {
			t.Errorf("after %s, %s = %v, want %v as written", by, c.name, reflect.Indirect(got), reflect.Indirect(want))
		}
	}
}
