package flows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// acceptedWithCategories creates a flow of a definition with the data
// categories Income (Inntekt) and Debt (Gjeld), accepted and valid for an
// hour.
func (b *bundle) acceptedWithCategories(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	defs := consent.NewDefinitions(b.pool, orgs{})
	author := consent.Author{OrganizationID: b.caller.OrganizationID, By: "client-a"}
	draft := consent.Draft{Title: consent.Text{EN: "Share your income", NB: "Del inntekten din"},
		Purpose:        consent.Text{EN: "We check your income.", NB: "Vi sjekker inntekten din."},
		DataCategories: []consent.Text{{EN: "Income", NB: "Inntekt"}, {EN: "Debt", NB: "Gjeld"}}}
	if _, err := defs.Create(ctx, author, "loan", draft); err != nil && apperr.CodeOf(err) != apperr.Conflict {
		t.Fatal(err)
	}
	in := newFlow("ID-7")
	in.FlowDefinitionID = "loan"
	id := b.create(t, in).FlowID
	b.decide(t, id, true, time.Now().Add(time.Hour))
	return id
}

// refusals records the flows a RecordUse refused, as an audit hook would.
type refusals struct {
	mu    sync.Mutex
	flows []string
}

func (r *refusals) hook(_ context.Context, _ database.Tx, f flows.Flow) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flows = append(r.flows, f.ID+":"+string(f.ConsentStatus))
	return nil
}

// TestAUseOfAnAcceptedConsentIsCountedAndPublished: a recorded use is
// kept, counted on the flow (numUses, lastUsedAt, a new version) and
// published as flow.used, which goes to endpoints only: the flow's own
// webhookUrl does not get it.
func TestAUseOfAnAcceptedConsentIsCountedAndPublished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.acceptedWithCategories(t)
	before := b.get(t, id)
	usedAt := time.Now().Add(time.Second).Truncate(time.Millisecond)
	var hooked flows.Use
	u, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: " fetched income 2025 ", UsedAt: &usedAt,
		DataCategories: []string{"Income", "Gjeld"}, Reference: "case 4711"}, nil,
		func(_ context.Context, _ database.Tx, u flows.Use) error { hooked = u; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if u.Action != "fetched income 2025" || !u.UsedAt.Equal(usedAt) || !slices.Equal(u.DataCategories, []string{"Income", "Gjeld"}) ||
		u.Reference != "case 4711" || u.RecordedBy != "client-a" || u.FlowID != id || u.RecordedAt.IsZero() || hooked.ID != u.ID {
		t.Fatalf("use %+v, hooked %+v", u, hooked)
	}
	f := b.get(t, id)
	if f.NumUses != 1 || f.LastUsedAt == nil || !f.LastUsedAt.Equal(usedAt) || f.Version != before.Version+1 {
		t.Fatalf("after a use: numUses %d, lastUsedAt %v, version %d (was %d)", f.NumUses, f.LastUsedAt, f.Version, before.Version)
	}
	// An older use leaves lastUsedAt at the latest.
	older := usedAt.Add(-time.Second)
	if _, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: "again", UsedAt: &older}, nil); err != nil {
		t.Fatal(err)
	}
	if f := b.get(t, id); f.NumUses != 2 || !f.LastUsedAt.Equal(usedAt) {
		t.Fatalf("after an older use: numUses %d, lastUsedAt %v, want 2 and %v", f.NumUses, f.LastUsedAt, usedAt)
	}
	if got := b.eventsOf(t, id); got != "flow.created:1,flow.accepted:2,flow.used:3,flow.used:4" {
		t.Fatalf("events %s", got)
	}
	if n := b.count(t, `select count(*) from test_events where kind = 'flow.used' and (url <> '' or task_id <> '')`); n != 0 {
		t.Fatalf("%d flow.used events for the flow's own webhookUrl, want none", n)
	}
}

// TestAUseOfAConsentNotInForceIsRefusedAndTheRefusalKept: pending,
// rejected, withdrawn and expired consents refuse a use with
// ErrConsentNotInForce, record nothing, and run the refused hook, whose
// writes commit.
func TestAUseOfAConsentNotInForceIsRefusedAndTheRefusalKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pending := b.create(t, newFlow("ID-1")).FlowID
	rejected := b.create(t, newFlow("ID-2")).FlowID
	b.decide(t, rejected, false, time.Now().Add(time.Hour))
	withdrawn := b.acceptedWithCategories(t)
	if _, err := b.withdraw(ctx, withdrawn); err != nil {
		t.Fatal(err)
	}
	expired := b.acceptedWithCategories(t)
	b.makeDue(t, expired)
	if _, err := b.flows.ExpireDueAcceptances(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// Past its validity but not yet expired by the job: refused all the same.
	due := b.acceptedWithCategories(t)
	b.makeDue(t, due)

	var r refusals
	for _, id := range []string{pending, rejected, withdrawn, expired, due} {
		before := b.get(t, id)
		_, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: "fetched"}, func(ctx context.Context, tx database.Tx, f flows.Flow) error {
			_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('refused', $1)`, f.ID)
			return errors.Join(err, r.hook(ctx, tx, f))
		})
		if !errors.Is(err, flows.ErrConsentNotInForce) {
			t.Errorf("%s consent: RecordUse = %v, want ErrConsentNotInForce", before.ConsentStatus, err)
		}
		if f := b.get(t, id); f.NumUses != 0 || f.Version != before.Version {
			t.Errorf("%s consent: numUses %d, version %d after a refused use", f.ConsentStatus, f.NumUses, f.Version)
		}
	}
	if n := b.count(t, `select count(*) from flow_uses`); n != 0 {
		t.Fatalf("%d uses recorded, want none", n)
	}
	if n := b.count(t, `select count(*) from test_events where kind = 'refused'`); n != 5 {
		t.Fatalf("%d refusals committed, want 5: %v", n, r.flows)
	}
	want := []string{pending + ":Unopened", rejected + ":Rejected", withdrawn + ":Withdrawn", expired + ":Expired", due + ":Accepted"}
	if !slices.Equal(r.flows, want) {
		t.Fatalf("refused %v, want %v", r.flows, want)
	}
}

// TestAWithdrawalAfterAUsesReadRefusesTheUse: a withdrawal that commits
// between RecordUse's read of the flow (which Check sees, in force) and
// the use's count refuses the use: nothing is counted or published, and
// the refusal is kept.
func TestAWithdrawalAfterAUsesReadRefusesTheUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.acceptedWithCategories(t)
	var checked []flows.ConsentStatus
	var r refusals
	_, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: "fetched", Check: func(f flows.Flow) error {
		checked = append(checked, f.ConsentStatus)
		_, err := b.withdraw(ctx, id)
		return err
	}}, r.hook)
	if !errors.Is(err, flows.ErrConsentNotInForce) {
		t.Fatalf("RecordUse after a withdrawal since its read = %v, want ErrConsentNotInForce", err)
	}
	if !slices.Equal(checked, []flows.ConsentStatus{flows.Accepted}) || !slices.Equal(r.flows, []string{id + ":Withdrawn"}) {
		t.Fatalf("Check saw %v, refused %v: want one Accepted read and the Withdrawn flow refused", checked, r.flows)
	}
	if f := b.get(t, id); f.NumUses != 0 {
		t.Fatalf("numUses %d after a refused use", f.NumUses)
	}
	if n := b.count(t, `select count(*) from flow_uses`); n != 0 {
		t.Fatalf("%d uses recorded, want none", n)
	}
	if got := b.eventsOf(t, id); strings.Contains(got, "flow.used") {
		t.Fatalf("events %s: a refused use was published", got)
	}
	// Check's own refusal is RecordUse's, and records nothing.
	other := b.acceptedWithCategories(t)
	refusal := errors.New("the caller refuses")
	if _, err := b.flows.RecordUse(ctx, b.caller, other, flows.NewUse{Action: "fetched",
		Check: func(flows.Flow) error { return refusal }}, r.hook); !errors.Is(err, refusal) {
		t.Fatalf("RecordUse with a refusing Check = %v", err)
	}
	if n := b.count(t, `select count(*) from flow_uses`); n != 0 {
		t.Fatalf("%d uses recorded after Check refused, want none", n)
	}
}

// TestABadUseIsRefusedNamingEachField: every offending field is named, and
// nothing is recorded; another organization's flow is not found.
func TestABadUseIsRefusedNamingEachField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.acceptedWithCategories(t)
	future := time.Now().Add(time.Hour)
	beforeConsent := time.Now().Add(-24 * time.Hour)
	for _, tt := range []struct {
		name string
		in   flows.NewUse
		want []string
	}{
		{"no action", flows.NewUse{}, []string{"action"}},
		{"long action and reference", flows.NewUse{Action: strings.Repeat("a", 201), Reference: strings.Repeat("r", 201)},
			[]string{"action", "reference"}},
		{"control characters", flows.NewUse{Action: "a\x00b"}, []string{"action"}},
		{"in the future", flows.NewUse{Action: "a", UsedAt: &future}, []string{"usedAt"}},
		{"before the consent", flows.NewUse{Action: "a", UsedAt: &beforeConsent}, []string{"usedAt"}},
		{"unknown categories", flows.NewUse{Action: "a", DataCategories: []string{"Income", "Health", "income"}},
			[]string{"dataCategories[1]", "dataCategories[2]"}},
	} {
		_, err := b.flows.RecordUse(ctx, b.caller, id, tt.in, nil)
		e, ok := apperr.As(err)
		var got []string
		if ok {
			for _, f := range e.Fields {
				got = append(got, f.Field)
			}
		}
		if !ok || e.Code != apperr.Invalid || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v naming %v, want Invalid naming %v", tt.name, err, got, tt.want)
		}
	}
	other := b.caller
	other.OrganizationID = "org-b"
	if _, err := b.flows.RecordUse(ctx, other, id, flows.NewUse{Action: "a"}, nil); !errors.Is(err, flows.ErrNotFound) {
		t.Fatalf("another organization's flow: %v, want ErrNotFound", err)
	}
	if _, err := b.flows.Uses(ctx, other, id, flows.UseParams{}); !errors.Is(err, flows.ErrNotFound) {
		t.Fatalf("another organization's uses: %v, want ErrNotFound", err)
	}
	if n := b.count(t, `select count(*) from flow_uses`); n != 0 {
		t.Fatalf("%d uses recorded, want none", n)
	}
}

// TestUsesPageLatestFirst walks a flow's uses both ways, a page at a time.
func TestUsesPageLatestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.acceptedWithCategories(t)
	start := time.Now()
	const n = 7
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second)
		if _, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: fmt.Sprintf("use %d", i), UsedAt: &at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	actions := func(p flows.UsePage) string {
		var s []string
		for _, u := range p.Uses {
			s = append(s, strings.TrimPrefix(u.Action, "use "))
		}
		return strings.Join(s, ",") + fmt.Sprintf(" more=%v", p.HasMore)
	}
	first, err := b.flows.Uses(ctx, b.caller, id, flows.UseParams{Limit: 3})
	if err != nil || actions(first) != "6,5,4 more=true" {
		t.Fatalf("first page %s, %v", actions(first), err)
	}
	second, err := b.flows.Uses(ctx, b.caller, id, flows.UseParams{Limit: 3, StartingAfter: first.Uses[2].ID})
	if err != nil || actions(second) != "3,2,1 more=true" {
		t.Fatalf("second page %s, %v", actions(second), err)
	}
	last, err := b.flows.Uses(ctx, b.caller, id, flows.UseParams{Limit: 3, StartingAfter: second.Uses[2].ID})
	if err != nil || actions(last) != "0 more=false" {
		t.Fatalf("last page %s, %v", actions(last), err)
	}
	back, err := b.flows.Uses(ctx, b.caller, id, flows.UseParams{Limit: 2, EndingBefore: second.Uses[0].ID})
	if err != nil || actions(back) != "5,4 more=true" {
		t.Fatalf("back from the second page %s, %v", actions(back), err)
	}
	for _, p := range []flows.UseParams{{Limit: 101}, {StartingAfter: "x"}, {StartingAfter: first.Uses[0].ID, EndingBefore: first.Uses[1].ID},
		{StartingAfter: "00000000-0000-7000-8000-000000000000"}} {
		if _, err := b.flows.Uses(ctx, b.caller, id, p); apperr.CodeOf(err) != apperr.Invalid {
			t.Errorf("%+v: %v, want Invalid", p, err)
		}
	}
}

// withNotice runs Run's maintenance every 10 ms, with a two-hour expiring notice.
func withNotice(c *flows.Config) {
	c.MaintenanceInterval, c.ExpiringNotice = 10*time.Millisecond, 2*time.Hour
}

// TestTwoInstancesNotifyEachExpiringAcceptanceOnce: two instances, each with
// its own pool, run their maintenance against one database at once, and a
// third calls the notice directly; each acceptance whose validity ends
// within the notice gets exactly one flow.expiring, and is Expiring. One
// that ends later, or has no end, gets none.
func TestTwoInstancesNotifyEachExpiringAcceptanceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	first := setupOn(t, url, withNotice)
	instances := []*bundle{first, instance(open(t, url), first.sealer, withNotice)}
	const n = 30
	ids := make([]string, n)
	for i := range ids {
		ids[i] = first.create(t, newFlow(fmt.Sprintf("ID-%d", i))).FlowID
		first.decide(t, ids[i], true, time.Now().Add(time.Hour))
	}
	later := first.create(t, newFlow("ID-later")).FlowID
	first.decide(t, later, true, time.Now().Add(3*time.Hour))
	if !first.get(t, ids[0]).Evidence.ValidUntil.After(time.Now()) || first.get(t, ids[0]).Expiring() {
		t.Fatal("an acceptance is expiring before any instance ran")
	}

	runCtx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	for _, b := range instances {
		running.Go(func() { _ = b.flows.Run(runCtx) })
	}
	t.Cleanup(func() { cancel(); running.Wait() })
	if _, err := instances[1].flows.NotifyExpiringAcceptances(ctx, 5); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every acceptance notified", func() bool {
		return first.count(t, `select count(*) from flows where expiring_notified_at is not null`) == n
	})
	// A few more rounds of both instances' maintenance find nothing more to send.
	rounds := first.count(t, `select count(*) from test_events`)
	waitFor(t, "more maintenance rounds", func() bool {
		n, err := first.flows.NotifyExpiringAcceptances(ctx, 100)
		return err == nil && n == 0 && first.count(t, `select count(*) from test_events`) == rounds
	})
	for _, id := range ids {
		if got := first.eventsOf(t, id); got != "flow.created:1,flow.accepted:2,flow.expiring:2" {
			t.Errorf("flow %s: events %s", id, got)
		}
		if f := instances[1].get(t, id); !f.Expiring() || f.ExpiringNotifiedAt == nil {
			t.Errorf("flow %s is not expiring after its notice", id)
		}
	}
	if got := first.eventsOf(t, later); got != "flow.created:1,flow.accepted:2" {
		t.Errorf("an acceptance ending after the notice: events %s", got)
	}
	// Withdrawn, it is no longer expiring.
	if _, err := first.withdraw(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if first.get(t, ids[0]).Expiring() {
		t.Error("a withdrawn consent is expiring")
	}
	for i, b := range instances {
		if logs := b.logs.String(); logs != "" {
			t.Errorf("instance %d logged:\n%s", i, logs)
		}
	}
}

// TestNoNoticeWithoutASetting: a zero notice sends no flow.expiring.
func TestNoNoticeWithoutASetting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.create(t, newFlow("ID-1")).FlowID
	b.decide(t, id, true, time.Now().Add(time.Minute))
	if n, err := b.flows.NotifyExpiringAcceptances(context.Background(), 10); err != nil || n != 0 {
		t.Fatalf("notified %d, %v; want none", n, err)
	}
}

// TestAUsesTextIsSealedUnderItsPersonsKey: a use's action and reference are
// kept only sealed, under the key of the flow's person, and read back as
// written. A use recorded before (its text kept as written) is sealed by
// the rekey, and reads the same after.
func TestAUsesTextIsSealedUnderItsPersonsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.acceptedWithCategories(t)
	u, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: "fetched income of Nordmann", Reference: "case-ID-7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `select count(*) from flow_uses where id = $1 and action is null and reference is null
		and action_sealed is not null and reference_sealed is not null
		and position('Nordmann' in encode(action_sealed, 'escape')) = 0`, u.ID); n != 1 {
		t.Fatal("the use's text is not kept sealed alone")
	}
	page, err := b.flows.Uses(ctx, b.caller, id, flows.UseParams{})
	if err != nil || len(page.Uses) != 1 || page.Uses[0].Action != "fetched income of Nordmann" || page.Uses[0].Reference != "case-ID-7" {
		t.Fatalf("the use read back: %+v %v", page.Uses, err)
	}

	// A use kept as written, as before uses were sealed.
	older, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: "checked debt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `update flow_uses set action = 'checked debt of Nordmann', reference = 'old-case',
		action_sealed = null, reference_sealed = null where id = $1`, older.ID); err != nil {
		t.Fatal(err)
	}
	r := rekey.NewRekeyer(b.pool, b.sealer, nil, nationalid.Format{})
	if n, err := r.Remaining(ctx); err != nil || n != 1 {
		t.Fatalf("before the rekey, %d left (%v), want the 1 use kept as written", n, err)
	}
	for {
		n, err := r.RekeyBatch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n := b.count(t, `select count(*) from flow_uses where action is not null or reference is not null`); n != 0 {
		t.Fatalf("%d uses keep their text as written after the rekey", n)
	}
	page, err = b.flows.Uses(ctx, b.caller, id, flows.UseParams{})
	if err != nil || len(page.Uses) != 2 || !slices.ContainsFunc(page.Uses, func(u flows.Use) bool {
		return u.Action == "checked debt of Nordmann" && u.Reference == "old-case"
	}) {
		t.Fatalf("the uses after the rekey: %+v %v", page.Uses, err)
	}
}

// TestRekeyMovesAnOlderFlowsUsesWithIt: the uses of a flow made before
// per-person keys, their text kept as written, are sealed under the
// person's key in the batch that moves the flow, and read as written.
func TestRekeyMovesAnOlderFlowsUsesWithIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.acceptedWithCategories(t)
	for _, action := range []string{"fetched income", "checked debt"} {
		if _, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: action}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// As before per-person keys: the uses' text as written, the flow under
	// the data key, and no subject key.
	if _, err := b.pool.Exec(ctx, `update flow_uses set action = 'written ' || id::text, reference = 'case-' || id::text,
		action_sealed = null, reference_sealed = null where flow_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	b.makeOld(t, id, nil)
	if _, err := b.pool.Exec(ctx, `delete from subject_keys`); err != nil {
		t.Fatal(err)
	}
	r := rekey.NewRekeyer(b.pool, b.sealer, nil, nationalid.Format{})
	if n, err := r.RekeyBatch(ctx, 10); err != nil || n != 1 {
		t.Fatalf("the batch moved %d flows, %v; want 1", n, err)
	}
	if n := b.count(t, `select count(*) from flow_uses where action is not null or reference is not null`); n != 0 {
		t.Fatalf("%d uses keep their text as written after their flow's batch", n)
	}
	page, err := b.flows.Uses(ctx, b.caller, id, flows.UseParams{})
	if err != nil || len(page.Uses) != 2 {
		t.Fatalf("the uses after the rekey: %+v %v", page.Uses, err)
	}
	for _, u := range page.Uses {
		if u.Action != "written "+u.ID || u.Reference != "case-"+u.ID {
			t.Errorf("use %s reads %q %q", u.ID, u.Action, u.Reference)
		}
	}
}

// TestConcurrentUsesAreEachCountedOnce: uses recorded at once, of a few
// flows (so that several are written together), are each kept, counted and
// published once, each flow's versions one apart; a use whose before hook
// fails fails alone, and leaves nothing behind.
func TestConcurrentUsesAreEachCountedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := []string{b.acceptedWithCategories(t), b.acceptedWithCategories(t), b.acceptedWithCategories(t)}
	before := map[string]int{}
	for _, id := range ids {
		before[id] = b.get(t, id).Version
	}
	const perFlow = 16
	refusal := errors.New("the hook refuses")
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		written = map[string]int{}
		failed  []error
	)
	for i := range perFlow * len(ids) {
		id := ids[i%len(ids)]
		hook := func(context.Context, database.Tx, flows.Use) error { return nil }
		if i == 7 {
			hook = func(context.Context, database.Tx, flows.Use) error { return refusal }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: fmt.Sprintf("use %d", i)}, nil, hook)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			written[id]++
		}()
	}
	close(start)
	wg.Wait()
	if len(failed) != 1 || !errors.Is(failed[0], refusal) {
		t.Fatalf("failures %v, want only the refusing hook's", failed)
	}
	for _, id := range ids {
		f := b.get(t, id)
		n := written[id]
		if f.NumUses != n || f.Version != before[id]+n || b.count(t, `select count(*) from flow_uses where flow_id = $1`, id) != n {
			t.Errorf("flow with %d uses written: numUses %d, version %d (was %d), %d rows", n, f.NumUses, f.Version, before[id],
				b.count(t, `select count(*) from flow_uses where flow_id = $1`, id))
		}
		var versions []int
		rows, err := b.pool.Query(ctx, `select version from test_events where flow_id = $1 and kind = 'flow.used' order by version`, id)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, v)
		}
		rows.Close()
		for k, v := range versions {
			if v != before[id]+k+1 {
				t.Fatalf("flow.used versions %v, want one each from %d", versions, before[id]+1)
			}
		}
		if len(versions) != n {
			t.Errorf("%d flow.used events for %d uses", len(versions), n)
		}
	}
}

// TestAUseHeldUpHoldsUpNoOther: a use whose before hook waits for a lock
// (as a twin request's Idempotency-Key makes it) waits alone: uses of the
// organization's other flows recorded meanwhile are written (those of its
// own flow wait for the flow's row, as they always did), and it is written
// once the lock is free.
func TestAUseHeldUpHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `create table test_hold (id int primary key); insert into test_hold values (1)`); err != nil {
		t.Fatal(err)
	}
	held, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	if _, err := held.Exec(ctx, `select * from test_hold where id = 1 for update`); err != nil {
		t.Fatal(err)
	}
	id := b.acceptedWithCategories(t)
	blocked := make(chan error, 1)
	go func() {
		_, err := b.flows.RecordUse(ctx, b.caller, id, flows.NewUse{Action: "held up"}, nil,
			func(ctx context.Context, tx database.Tx, _ flows.Use) error {
				_, err := tx.Exec(ctx, `select * from test_hold where id = 1 for update`)
				return err
			})
		blocked <- err
	}()
	testwait.For(t, "the held-up use waiting for the lock", func() (bool, string) {
		n := b.count(t, `select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)
		return n > 0, fmt.Sprintf("%d waiting", n)
	})
	other := b.acceptedWithCategories(t)
	for i := range 5 {
		if _, err := b.flows.RecordUse(ctx, b.caller, other, flows.NewUse{Action: fmt.Sprintf("meanwhile %d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("the held-up use ended (%v) while its lock was held", err)
	default:
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the held-up use, once free: %v", err)
	}
	if f, g := b.get(t, id), b.get(t, other); f.NumUses != 1 || g.NumUses != 5 {
		t.Fatalf("numUses %d and %d, want the held-up use and the 5 written meanwhile", f.NumUses, g.NumUses)
	}
}
