package consent_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
)

func TestVisitOpensOnceAndShowsOnlyAMaskedID(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	c, token := e.create(t, "https://bank.example/done")

	req, err := e.journey.Visit(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if req.FlowID != c.FlowID || req.Text.Recipient != "Acme Bank" || req.OrganizationName != "Acme Bank" || req.ReferenceName != "Mortgage application" ||
		req.ReferenceID != c.ReferenceID || req.Status != flows.Opened || req.Closure != consent.Open ||
		req.MaskedNationalID != "•••••••••01" || req.NationalIDEnd != "01" || req.ExpiresAt.IsZero() {
		t.Fatalf("first visit: %+v", req)
	}
	for _, s := range []string{req.MaskedNationalID, req.ReferenceName, req.Text.Recipient, req.ReferenceID} {
		if strings.Contains(s, "12345678901") {
			t.Fatalf("the request shows the national id in full: %+v", req)
		}
	}
	f := e.get(t, c.FlowID)
	if f.Version != 2 || f.ConsentStatus != flows.Opened || f.OpenedAt == nil {
		t.Fatalf("after the first visit: version %d, %s, opened %v", f.Version, f.ConsentStatus, f.OpenedAt)
	}
	// Later visits change nothing.
	for range 2 {
		if req, err := e.journey.Visit(ctx, token); err != nil || req.Status != flows.Opened {
			t.Fatalf("another visit: %+v %v", req, err)
		}
	}
	if f := e.get(t, c.FlowID); f.Version != 2 {
		t.Fatalf("visits after the first bumped the version to %d", f.Version)
	}
	if got := e.events(t, c.FlowID); strings.Join(got, " ") != "flow.created flow.opened" {
		t.Fatalf("events %v", got)
	}
	for _, bad := range []string{"", "nope", strings.Repeat("A", 43), token[:42] + "x"} {
		if _, err := e.journey.Visit(ctx, bad); !errors.Is(err, consent.ErrUnknownLink) {
			t.Errorf("Visit(%q) = %v, want ErrUnknownLink", bad, err)
		}
	}
}

func TestDecideRecordsTheAnswerAndBuildsTheRedirect(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	for _, tt := range []struct {
		accept       bool
		status       flows.ConsentStatus
		event, query string
	}{
		{true, flows.Accepted, "flow.accepted", "accepted"},
		{false, flows.Rejected, "flow.rejected", "rejected"},
	} {
		c, token := e.create(t, "https://bank.example/done?case=7&lang=nb")
		if _, err := e.journey.Visit(ctx, token); err != nil {
			t.Fatal(err)
		}
		// The proof compares without spaces, dashes and case.
		d, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "123456 78901", ACR: substantial}, consent.Answer{Accept: tt.accept})
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(d.RedirectURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if d.Accepted != tt.accept || u.Host != "bank.example" || u.Path != "/done" || q.Get("case") != "7" || q.Get("lang") != "nb" ||
			q.Get("flowId") != c.FlowID || q.Get("referenceId") != c.ReferenceID || q.Get("status") != tt.query {
			t.Fatalf("decision %+v", d)
		}
		f := e.get(t, c.FlowID)
		if f.ConsentStatus != tt.status || f.ProcessStatus != flows.Completed || !f.Archived() || f.Version != 3 || f.DecidedAt == nil {
			t.Fatalf("after the decision: %s %s archived=%v version %d", f.ConsentStatus, f.ProcessStatus, f.Archived(), f.Version)
		}
		if got := e.events(t, c.FlowID); strings.Join(got, " ") != "flow.created flow.opened "+tt.event {
			t.Fatalf("events %v", got)
		}
		// The answer is final: neither the same nor the other answer is taken again.
		for _, again := range []bool{tt.accept, !tt.accept} {
			_, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial}, consent.Answer{Accept: again})
			var closed *consent.ClosedError
			if !errors.As(err, &closed) || closed.Closure != consent.Decided || !errors.Is(err, consent.ErrClosed) {
				t.Fatalf("second decision: %v", err)
			}
		}
		if req, err := e.journey.Visit(ctx, token); err != nil || req.Closure != consent.Decided {
			t.Fatalf("visit after the decision: %+v %v", req, err)
		}
		if f := e.get(t, c.FlowID); f.Version != 3 || f.ConsentStatus != tt.status {
			t.Fatalf("a refused decision changed the flow: version %d %s", f.Version, f.ConsentStatus)
		}
	}
}

func TestDecideWithoutAVisitOpensToo(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	c, token := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(context.Background(), token, consent.Proof{Skip: true}, consent.Answer{Accept: true}); err != nil {
		t.Fatal(err)
	}
	if f := e.get(t, c.FlowID); f.ConsentStatus != flows.Accepted || f.OpenedAt == nil {
		t.Fatalf("%s opened %v", f.ConsentStatus, f.OpenedAt)
	}
}

func TestTheWrongPersonCannotDecide(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	c, token := e.create(t, "https://bank.example/done")
	req, err := e.journey.Visit(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []string{"10987654321", "1234567890", "123456789012", ""} {
		if err := e.journey.CheckPerson(ctx, req, wrong); !errors.Is(err, consent.ErrWrongPerson) {
			t.Errorf("CheckPerson(%q) = %v", wrong, err)
		}
		want := consent.ErrWrongPerson
		if wrong == "" {
			want = consent.ErrNotProven // nobody signed in yet: not a mismatch
		}
		if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: wrong, ACR: substantial}, consent.Answer{Accept: true}); !errors.Is(err, want) {
			t.Errorf("Decide as %q = %v", wrong, err)
		}
	}
	if at, err := e.journey.IdentityProvenAt(ctx, consent.FlowRef{OrganizationID: e.caller.OrganizationID, FlowID: c.FlowID}); err != nil || at != nil {
		t.Fatalf("identity proven at %v (%v) before the right person signed in", at, err)
	}
	if err := e.journey.CheckPerson(ctx, req, "12345678901"); err != nil {
		t.Fatalf("the right person: %v", err)
	}
	first, err := e.journey.IdentityProvenAt(ctx, consent.FlowRef{OrganizationID: e.caller.OrganizationID, FlowID: c.FlowID})
	if err != nil || first == nil {
		t.Fatalf("the proof is not recorded: %v, %v", first, err)
	}
	if err := e.journey.CheckPerson(ctx, req, "123 456 789 01"); err != nil {
		t.Fatalf("the right person, spaced: %v", err)
	}
	if again, _ := e.journey.IdentityProvenAt(ctx, consent.FlowRef{OrganizationID: e.caller.OrganizationID, FlowID: c.FlowID}); again == nil || !again.Equal(*first) {
		t.Fatalf("a second proof moved the first one: %v, then %v", first, again)
	}
	f := e.get(t, c.FlowID)
	if f.ConsentStatus != flows.Opened || f.ProcessStatus != flows.Active || f.Version != 2 {
		t.Fatalf("a mismatch changed the flow: %s %s version %d", f.ConsentStatus, f.ProcessStatus, f.Version)
	}
	logs := e.logs.String()
	if strings.Count(logs, `"event":"consent.identity_mismatch"`) != 7 || !strings.Contains(logs, c.FlowID) {
		t.Fatalf("mismatches are not logged:\n%s", logs)
	}
	if recorded := e.audited(t, c.FlowID); len(recorded) != 7 || recorded[0] != "org-1 "+c.ReferenceID || recorded[6] != "org-1 "+c.ReferenceID {
		t.Fatalf("audit records %q, want 7 naming the organization and the flow's reference", recorded)
	}
	for _, id := range []string{"12345678901", "10987654321", "1234567890"} {
		if strings.Contains(logs, id) {
			t.Fatalf("the log holds a national id:\n%s", logs)
		}
	}
}

func TestClosedRequestsAcceptNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()

	// Cancelled by the organization.
	c, token := e.create(t, "https://bank.example/done")
	if _, err := e.flows.Cancel(ctx, e.caller, c.FlowID, etag.Any); err != nil {
		t.Fatal(err)
	}
	req, err := e.journey.Visit(ctx, token)
	if err != nil || req.Closure != consent.Cancelled || req.Status != flows.Unopened {
		t.Fatalf("visit of a cancelled flow: %+v %v", req, err)
	}
	var closed *consent.ClosedError
	if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial}, consent.Answer{Accept: true}); !errors.As(err, &closed) || closed.Closure != consent.Cancelled {
		t.Fatalf("decision on a cancelled flow: %v", err)
	}
	if got := e.events(t, c.FlowID); strings.Join(got, " ") != "flow.created flow.cancelled" {
		t.Fatalf("events %v", got)
	}

	// Deleted: the link is unknown.
	c, token = e.create(t, "https://bank.example/done")
	if _, err := e.flows.Delete(ctx, e.caller, c.FlowID, etag.Any); err != nil {
		t.Fatal(err)
	}
	if _, err := e.journey.Visit(ctx, token); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("visit of a deleted flow: %v", err)
	}
	if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial}, consent.Answer{Accept: true}); !errors.Is(err, consent.ErrUnknownLink) {
		t.Fatalf("decision on a deleted flow: %v", err)
	}
}

func TestExpiryIsEnforcedAtUseAndByTheJob(t *testing.T) {
	t.Parallel()
	e := setup(t, 50*time.Millisecond)
	ctx := context.Background()
	c, token := e.create(t, "https://bank.example/done")
	// Wait for the condition, not for a time: the request reports itself expired.
	deadline := testwait.Deadline(t)
	var req consent.Request
	for {
		var err error
		if req, err = e.journey.Visit(ctx, token); err != nil {
			t.Fatal(err)
		}
		if req.Closure == consent.Expired || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if req.Closure != consent.Expired {
		t.Fatalf("the request never expired: %+v", req)
	}
	var closed *consent.ClosedError
	if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial}, consent.Answer{Accept: true}); !errors.As(err, &closed) || closed.Closure != consent.Expired {
		t.Fatalf("decision on an expired request: %v", err)
	}
	// Expired and not yet swept, the flow is unchanged by use: no answer, no
	// new version. (A visit before the deadline may have opened it.)
	before := e.get(t, c.FlowID)
	if _, err := e.journey.Visit(ctx, token); err != nil {
		t.Fatal(err)
	}
	if f := e.get(t, c.FlowID); f.ProcessStatus != flows.Active || f.DecidedAt != nil || f.Version != before.Version {
		t.Fatalf("before the job: %s %s version %d, was %d", f.ConsentStatus, f.ProcessStatus, f.Version, before.Version)
	}
	n, err := e.flows.ExpireDue(ctx, time.Now(), 100)
	if err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v", n, err)
	}
	f := e.get(t, c.FlowID)
	if f.ProcessStatus != flows.Cancelled || !f.Archived() || f.Version != before.Version+1 {
		t.Fatalf("after the job: %s version %d", f.ProcessStatus, f.Version)
	}
	if got := strings.Join(e.events(t, c.FlowID), " "); !strings.HasPrefix(got, "flow.created") || !strings.HasSuffix(got, "flow.cancelled") ||
		strings.Contains(got, "accepted") || strings.Contains(got, "rejected") {
		t.Fatalf("events %v", got)
	}
	if req, err := e.journey.Visit(ctx, token); err != nil || req.Closure != consent.Expired {
		t.Fatalf("visit after the job: %+v %v", req, err)
	}
}

func TestConcurrentDecisionsRecordExactlyOne(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	for round := range 5 {
		c, token := e.create(t, "https://bank.example/done")
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// Two tabs: one accepts, the other rejects.
				_, errs[i] = e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial}, consent.Answer{Accept: i == 0})
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, consent.ErrClosed):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		f := e.get(t, c.FlowID)
		events := e.events(t, c.FlowID)
		decisions := 0
		for _, k := range events {
			if k == "flow.accepted" || k == "flow.rejected" {
				decisions++
			}
		}
		if won != 1 || decisions != 1 || f.ProcessStatus != flows.Completed || f.Version != 2 {
			t.Fatalf("round %d: %d decisions taken, %d events %v, %s version %d", round, won, decisions, events, f.ProcessStatus, f.Version)
		}
		want := flows.Rejected
		if errs[0] == nil {
			want = flows.Accepted
		}
		if f.ConsentStatus != want {
			t.Fatalf("round %d: the flow says %s, the winner was %s", round, f.ConsentStatus, want)
		}
	}
}

// TestADecisionNeedsOneConnection: on a pool of one connection a decision
// completes, the proof of identity recorded in its transaction; the wrong
// person's attempt leaves its audit record, committed, and decides nothing.
func TestADecisionNeedsOneConnection(t *testing.T) {
	t.Parallel()
	pool, err := database.Open(context.Background(), dbtest.NewURL(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := setupOn(t, pool, time.Hour)
	// Waiting for a second connection would wait until this deadline.
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()

	wrong, wrongToken := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(ctx, wrongToken, consent.Proof{NationalID: "10987654321", ACR: substantial}, consent.Answer{Accept: true}); !errors.Is(err, consent.ErrWrongPerson) {
		t.Fatalf("the wrong person's decision = %v, want ErrWrongPerson", err)
	}
	if got := e.audited(t, wrong.FlowID); len(got) != 1 || got[0] != "org-1 "+wrong.ReferenceID {
		t.Fatalf("audit records %q, want the mismatch's", got)
	}
	if f := e.get(t, wrong.FlowID); f.ProcessStatus != flows.Active || f.Version != 1 || f.DecidedAt != nil {
		t.Fatalf("the wrong person decided: %s version %d", f.ProcessStatus, f.Version)
	}

	right, token := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial}, consent.Answer{Accept: true}); err != nil {
		t.Fatalf("decision on a pool of one: %v", err)
	}
	if f := e.get(t, right.FlowID); f.ConsentStatus != flows.Accepted {
		t.Fatalf("after the decision: %s", f.ConsentStatus)
	}
	if at, err := e.journey.IdentityProvenAt(ctx, consent.FlowRef{OrganizationID: e.caller.OrganizationID, FlowID: right.FlowID}); err != nil || at == nil {
		t.Fatalf("the proof of identity is not recorded: %v, %v", at, err)
	}
}

func TestMaskNationalID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "", "7": "•", "12": "••", "123": "•23", "12345678901": "•••••••••01", "ÅÆØ-1": "•••-1"} {
		if got := consent.MaskNationalID(in); got != want {
			t.Errorf("MaskNationalID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThePersonWithdrawsTheirAcceptance(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	me := consent.Proof{NationalID: "12345678901", ACR: substantial}
	c, token := e.create(t, "https://bank.example/done")

	if _, err := e.journey.Withdraw(ctx, token, me); !errors.As(err, new(*consent.ClosedError)) {
		t.Fatalf("withdrawing an open request = %v, want a ClosedError", err)
	}
	if _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true, Language: "nb"}); err != nil {
		t.Fatal(err)
	}
	req, err := e.journey.Visit(ctx, token)
	if err != nil || req.Closure != consent.Decided || req.Status != flows.Accepted {
		t.Fatalf("the link after the acceptance: %v %v", req.Closure, err)
	}
	before, err := e.journey.Receipts(ctx, req)
	if err != nil || len(before) != 1 || before[0].Receipt.Decision != flows.DecisionAccepted || before[0].Receipt.Definition.Language != "nb" {
		t.Fatalf("receipts after the acceptance: %+v %v", before, err)
	}

	for name, p := range map[string]consent.Proof{
		"no proof":         {},
		"someone else":     {NationalID: "10987654321", ACR: substantial},
		"a weaker sign-in": {NationalID: "12345678901", ACR: "urn:unknown"},
	} {
		if _, err := e.journey.Withdraw(ctx, token, p); err == nil {
			t.Errorf("%s withdrew", name)
		}
	}
	if f := e.get(t, c.FlowID); f.ConsentStatus != flows.Accepted || f.NumAttachments != 1 {
		t.Fatalf("refused withdrawals changed the flow: %s, %d receipts", f.ConsentStatus, f.NumAttachments)
	}
	if got := e.audited(t, c.FlowID); len(got) != 1 {
		t.Fatalf("the other person's attempt is not audited: %q", got)
	}

	r, err := e.journey.Withdraw(ctx, token, me)
	if err != nil {
		t.Fatal(err)
	}
	if r.Receipt.Decision != flows.DecisionWithdrawn || r.Receipt.Previous != before[0].Receipt.ID ||
		r.Receipt.WithdrawnBy != flows.ByIndividual || r.Receipt.Subject != before[0].Receipt.Subject {
		t.Fatalf("the withdrawal's receipt: %+v", r.Receipt)
	}
	f := e.get(t, c.FlowID)
	if f.ConsentStatus != flows.Withdrawn || f.WithdrawnBy != flows.ByIndividual || f.WithdrawnAt == nil || f.NumAttachments != 2 {
		t.Fatalf("after the withdrawal: %s by %q, %d receipts", f.ConsentStatus, f.WithdrawnBy, f.NumAttachments)
	}
	if got := e.events(t, c.FlowID); got[len(got)-1] != "flow.withdrawn" {
		t.Fatalf("events %v, want flow.withdrawn last", got)
	}
	var closed *consent.ClosedError
	if _, err := e.journey.Withdraw(ctx, token, me); !errors.As(err, &closed) || closed.Closure != consent.Withdrawn {
		t.Fatalf("a second withdrawal = %v, want closed as withdrawn", err)
	}
	if req, err := e.journey.Visit(ctx, token); err != nil || req.Closure != consent.Withdrawn {
		t.Fatalf("the link after the withdrawal: %v %v", req.Closure, err)
	}
}
