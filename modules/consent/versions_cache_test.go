package consent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent"
)

// TestKeptVersionsAreThoseOfEachFlow: with the versions kept once read, the
// person's page still shows each flow the version it pinned, a version
// published since as soon as a flow pins it, and both after the definition
// is retired.
func TestKeptVersionsAreThoseOfEachFlow(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	author := consent.Author{OrganizationID: e.caller.OrganizationID, By: "client-1"}
	if _, err := e.defs.Create(ctx, author, "mortgage", mortgage()); err != nil {
		t.Fatal(err)
	}
	first, _ := e.createOn(t, "https://bank.example/done", "mortgage", 0)
	titles := func(when string, want map[string]string) {
		t.Helper()
		mine, err := e.journey.Mine(ctx, me, nil)
		if err != nil || len(mine) != len(want) {
			t.Fatalf("%s: the page: %+v, %v", when, mine, err)
		}
		for _, m := range mine {
			if m.Text.Title.EN != want[m.FlowID] {
				t.Errorf("%s: flow %s shows %q, want %q", when, m.FlowID, m.Text.Title.EN, want[m.FlowID])
			}
		}
	}
	titles("v1", map[string]string{first.FlowID: "Share your income data"})
	next := mortgage()
	next.Title.EN = "Share your income and tax data"
	if _, err := e.defs.Publish(ctx, author, "mortgage", next); err != nil {
		t.Fatal(err)
	}
	second, _ := e.createOn(t, "https://bank.example/done", "mortgage", 0)
	both := map[string]string{first.FlowID: "Share your income data", second.FlowID: "Share your income and tax data"}
	titles("v2 published", both)
	if _, err := e.defs.Retire(ctx, author, "mortgage", etag.Any); err != nil {
		t.Fatal(err)
	}
	titles("retired", both)
}

// TestADefaultMadeInARolledBackTransactionIsNotKept: the default version 1
// a transaction makes, and reads again, is not kept when that transaction
// rolls back; the one made afterwards is what is read.
func TestADefaultMadeInARolledBackTransactionIsNotKept(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	org := "7d5c1f50-6c2f-4c4e-9a43-0d1f8b7e1a11" // an organization with no default yet
	var made consent.Version
	rollBack := errors.New("roll back")
	err := database.WithTx(ctx, e.pool, func(tx database.Tx) error {
		for range 2 {
			v, err := e.defs.VersionTx(ctx, tx, org, consent.DefaultDefinitionID, 1)
			if err != nil {
				return err
			}
			made = v
		}
		return rollBack
	})
	if !errors.Is(err, rollBack) {
		t.Fatal(err)
	}
	got, err := e.defs.Version(ctx, org, consent.DefaultDefinitionID, 1)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.defs.Get(ctx, org, consent.DefaultDefinitionID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.PublishedAt.Equal(stored.Version.PublishedAt) || got.PublishedAt.Equal(made.PublishedAt) {
		t.Errorf("read %v, stored %v, made in the rolled back transaction %v", got.PublishedAt, stored.Version.PublishedAt, made.PublishedAt)
	}
	again, err := e.defs.Version(ctx, org, consent.DefaultDefinitionID, 1)
	if err != nil || !again.PublishedAt.Equal(stored.Version.PublishedAt) {
		t.Errorf("read again: %v, %v; want %v", again.PublishedAt, err, stored.Version.PublishedAt)
	}
}
