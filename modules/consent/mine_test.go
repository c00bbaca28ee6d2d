package consent_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
)

// TestThePersonsPageShowsUsesAndTheExpiringNotice: the person's own page
// shows the uses the organization recorded, the latest as "last used", and
// the warning that the consent runs out soon, in time order with the rest of
// its history.
func TestThePersonsPageShowsUsesAndTheExpiringNotice(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	me := consent.Proof{NationalID: "123456 78901", ACR: substantial}
	if _, err := e.defs.Create(ctx, consent.Author{OrganizationID: e.caller.OrganizationID, By: "client-1"}, "mortgage", mortgage()); err != nil {
		t.Fatal(err)
	}
	c, token := e.createOn(t, "https://bank.example/done", "mortgage", 0)
	if _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true, Language: "en"}); err != nil {
		t.Fatal(err)
	}
	mine := func() consent.MyConsent {
		t.Helper()
		all, err := e.journey.Mine(ctx, me, nil)
		if err != nil || len(all) != 1 || all[0].FlowID != c.FlowID {
			t.Fatalf("the person's page: %+v, %v", all, err)
		}
		return all[0]
	}
	if m := mine(); m.LastUsedAt != nil || m.Expiring || has(m.History, consent.HappenedUsed) {
		t.Fatalf("before any use or notice: last used %v, expiring %v, history %+v", m.LastUsedAt, m.Expiring, m.History)
	}

	decided := e.get(t, c.FlowID).DecidedAt
	first, second := decided.Add(time.Second), decided.Add(2*time.Second)
	for _, u := range []struct {
		action string
		at     time.Time
	}{{"fetched income 2025", second}, {"fetched income 2024", first}} {
		if _, err := e.flows.RecordUse(ctx, e.caller, c.FlowID, flows.NewUse{Action: u.action, UsedAt: &u.at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.flows.NotifyExpiringAcceptances(ctx, 10); err != nil || n != 1 {
		t.Fatalf("the expiring notice: %d sent, %v", n, err)
	}

	m := mine()
	if m.LastUsedAt == nil || !m.LastUsedAt.Equal(second) || !m.Expiring {
		t.Fatalf("last used %v (want %v), expiring %v", m.LastUsedAt, second, m.Expiring)
	}
	var kinds, actions []string
	for i, h := range m.History {
		if i > 0 && h.At.Before(m.History[i-1].At) {
			t.Errorf("the history is out of time order: %+v", m.History)
		}
		kinds = append(kinds, h.Kind)
		if h.Kind == consent.HappenedUsed {
			actions = append(actions, h.Action)
		}
	}
	if want := []string{"fetched income 2024", "fetched income 2025"}; len(actions) != 2 || actions[0] != want[0] || actions[1] != want[1] {
		t.Errorf("the uses in the history: %q, want %q", actions, want)
	}
	if !has(m.History, consent.HappenedExpiring) || !has(m.History, consent.HappenedAccepted) {
		t.Errorf("the history lacks the acceptance or the notice: %q", kinds)
	}
}

func has(h []consent.Happening, kind string) bool {
	for _, x := range h {
		if x.Kind == kind {
			return true
		}
	}
	return false
}

// TestThePersonsPageNeedsOneConnection: on a pool of one connection the
// person's page answers; checking its receipts, which may load the receipt
// keys, waits for no second connection inside its transaction (with every
// connection held by such pages, none would ever come).
func TestThePersonsPageNeedsOneConnection(t *testing.T) {
	t.Parallel()
	pool, err := database.Open(context.Background(), dbtest.NewURL(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := setupOn(t, pool, time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	me := consent.Proof{NationalID: "12345678901", ACR: substantial}
	_, token := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true}); err != nil {
		t.Fatal(err)
	}
	mine, err := e.journey.Mine(ctx, me, nil)
	if err != nil || len(mine) != 1 || len(mine[0].Receipts) != 1 || mine[0].Receipts[0].Receipt.ID == "" {
		t.Fatalf("the person's page on a pool of one: %+v, %v", mine, err)
	}
}
