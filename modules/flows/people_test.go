package flows_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// swedish sets up the flows module with Swedish national ids read on 1 May
// 2026, and a person index.
func swedish(t *testing.T) *bundle {
	t.Helper()
	now := func() time.Time { return time.Date(2026, time.May, 1, 12, 0, 0, 0, time.UTC) }
	format := nationalid.MustNew(nationalid.FormatSweden, now)
	return setup(t, func(c *flows.Config) {
		c.NationalIDs = format
		c.PersonIndex = nationalid.NewBlindIndex(bytes.Repeat([]byte{6}, 32), format)
	})
}

// TestTwoSwedesAreNotOne: 121212-1212 (born 2012) and 121212+1212 (born
// 1912) are two people, and 201212121212 is the first of them written in
// twelve digits. The flows of each spelling are kept in the canonical
// form; the person's own page lists each person's flows alone; erasing
// 121212-1212 erases the 2012 person's two flows and leaves the 1912
// person's; a 10-digit number without its sign is refused.
func TestTwoSwedesAreNotOne(t *testing.T) {
	t.Parallel()
	b := swedish(t)
	ctx := context.Background()
	young := b.create(t, newFlow("121212-1212"))
	old := b.create(t, newFlow("121212+1212"))
	youngAgain := b.create(t, newFlow("201212121212"))
	if got := b.get(t, young.FlowID).NationalID; got != "201212121212" {
		t.Errorf("121212-1212 is kept as %q, want its canonical 201212121212", got)
	}
	if got := b.get(t, old.FlowID).NationalID; got != "191212121212" {
		t.Errorf("121212+1212 is kept as %q, want its canonical 191212121212", got)
	}
	if _, err := b.flows.Create(ctx, b.caller, newFlow("1212121212")); err == nil {
		t.Error("a 10-digit number without its sign was taken")
	}

	for asked, want := range map[string][]string{
		"121212-1212":   {young.FlowID, youngAgain.FlowID},
		"201212121212":  {young.FlowID, youngAgain.FlowID},
		"121212+1212":   {old.FlowID},
		"19121212-1212": {old.FlowID},
		"1212121212":    nil,
	} {
		got, err := b.flows.FlowsOfPerson(ctx, asked)
		slices.Sort(want)
		if err != nil || !slices.Equal(flowIDs(got), want) {
			t.Errorf("FlowsOfPerson(%q) = %v %v, want %v", asked, flowIDs(got), err, want)
		}
	}

	var erased flows.Erased
	if err := database.WithTx(ctx, b.pool, func(tx database.Tx) (err error) {
		erased, err = b.flows.EraseSubjectTx(ctx, tx, b.caller.OrganizationID, "121212-1212", "client:a")
		if err != nil {
			return err
		}
		_, _, err = b.flows.DestroySubjectKeyTx(ctx, tx, b.caller.OrganizationID, "121212-1212")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, d := range erased.Deletions {
		gone = append(gone, d.FlowID)
	}
	slices.Sort(gone)
	want := []string{young.FlowID, youngAgain.FlowID}
	slices.Sort(want)
	if !slices.Equal(gone, want) {
		t.Errorf("erasing 121212-1212 erased %v, want %v", gone, want)
	}
	if f, err := b.flows.Get(ctx, b.caller, old.FlowID); err != nil || f.Person != "191212121212" {
		t.Errorf("the 1912 person's flow after the 2012 person's erasure: %+v %v", f.Person, err)
	}
	if _, err := b.flows.Get(ctx, b.caller, young.FlowID); !errors.Is(err, flows.ErrNotFound) {
		t.Errorf("an erased flow: %v", err)
	}
}

// TestSwedesOfAnEarlierVersionAreToldApart: flows that a flowd from before
// canonical national ids kept (121212-1212 and 121212+1212 under one
// subject key of their common 10 digits, indexed so) are told apart. An
// erasure of the 2012 person before "flowd flows reindex" erases their
// flows alone and leaves the shared key to the 1912 person's; the re-index
// moves each flow under its own person's key, destroys the shared one, and
// then the person's own page finds each person's flows again.
func TestSwedesOfAnEarlierVersionAreToldApart(t *testing.T) {
	t.Parallel()
	b := swedish(t)
	ctx := context.Background()
	format := nationalid.MustNew(nationalid.FormatSweden, func() time.Time { return time.Date(2026, time.May, 1, 0, 0, 0, 0, time.UTC) })
	index := nationalid.NewBlindIndex(bytes.Repeat([]byte{6}, 32), format)
	other := *b
	other.caller = flows.Caller{OrganizationID: "org-b", ClientID: "client-b"}
	young, old := b.create(t, newFlow("121212-1212")), b.create(t, newFlow("121212+1212"))
	youngB, youngB2, oldB := other.create(t, newFlow("121212-1212")), other.create(t, newFlow("201212121212")), other.create(t, newFlow("121212+1212"))
	if err := flows.MakeLegacy(ctx, b.flows, index, "org-a", "1212121212", "earlier",
		map[string]string{young.FlowID: "121212-1212", old.FlowID: "121212+1212"}); err != nil {
		t.Fatal(err)
	}
	if err := flows.MakeLegacy(ctx, b.flows, index, "org-b", "1212121212", "earlier",
		map[string]string{youngB.FlowID: "1212121212", youngB2.FlowID: "201212121212", oldB.FlowID: "121212+1212"}); err != nil {
		t.Fatal(err)
	}

	// Organization B erases the 2012 person before the re-index.
	var erased flows.Erased
	if err := database.WithTx(ctx, b.pool, func(tx database.Tx) (err error) {
		if erased, err = other.flows.EraseSubjectTx(ctx, tx, "org-b", "121212-1212", "client:b"); err != nil {
			return err
		}
		_, _, err = other.flows.DestroySubjectKeyTx(ctx, tx, "org-b", "121212-1212")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(erased.Deletions) != 2 {
		t.Errorf("erasing the 2012 person from the shared key erased %d flows, want 2", len(erased.Deletions))
	}
	if f, err := other.flows.Get(ctx, other.caller, oldB.FlowID); err != nil || f.NationalID != "121212+1212" {
		t.Fatalf("the 1912 person's flow under the shared key: %+v %v", f.NationalID, err)
	}

	r := rekeyReindexer(b, index, format)
	for {
		n, err := r.ReindexBatch(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n, err := r.Remaining(ctx); err != nil || n != 0 {
		t.Errorf("%d left to index after the re-index, %v", n, err)
	}
	if n := b.count(t, `select count(*) from subject_keys where destroyed_at is null and person_index_key = 'earlier'`); n != 0 {
		t.Errorf("%d keys of the earlier form live on", n)
	}
	for asked, want := range map[string][]string{
		"121212-1212":  {young.FlowID},
		"121212+1212":  {old.FlowID, oldB.FlowID},
		"191212121212": {old.FlowID, oldB.FlowID},
	} {
		got, err := b.flows.FlowsOfPerson(ctx, asked)
		slices.Sort(want)
		if err != nil || !slices.Equal(flowIDs(got), want) {
			t.Errorf("after the re-index, FlowsOfPerson(%q) = %v %v, want %v", asked, flowIDs(got), err, want)
		}
	}
	if f := b.get(t, old.FlowID); f.NationalID != "191212121212" || f.Person != "191212121212" {
		t.Errorf("the 1912 person's flow after the re-index keeps %q (%q)", f.NationalID, f.Person)
	}
	if n := b.count(t, `select count(distinct subject_key_id) from flows where organization_id = 'org-a'`); n != 2 {
		t.Errorf("org-a's two people have %d keys, want 2", n)
	}
}

// rekeyReindexer is the re-index "flowd flows reindex" runs on b's database.
func rekeyReindexer(b *bundle, index *nationalid.BlindIndex, format nationalid.Format) *rekey.Reindexer {
	return rekey.NewReindexer(b.pool, b.sealer, index, format)
}
