package consent_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/taskreports"
)

// me is the proof of the person every flow of the tests is for.
var me = consent.Proof{NationalID: "12345678901", ACR: substantial}

// receiptsOf returns the flow's receipts as verified, oldest first.
func (e *journeyEnv) receiptsOf(t *testing.T, flowID string) []receipts.Receipt {
	t.Helper()
	ctx := context.Background()
	list, err := e.flows.Attachments(ctx, e.caller, flowID)
	if err != nil {
		t.Fatal(err)
	}
	var out []receipts.Receipt
	for _, a := range list {
		full, err := e.flows.Attachment(ctx, e.caller, flowID, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.receipts.Verify(ctx, full.Body)
		if err != nil {
			t.Fatalf("receipt %s: %v", a.ID, err)
		}
		out = append(out, v.Receipt)
	}
	return out
}

// openIncident opens an incident on the flow's webhook delivery task, as a
// failing delivery does.
func (e *journeyEnv) openIncident(t *testing.T, flowID string) {
	t.Helper()
	ctx := context.Background()
	tasks, err := e.flows.Tasks(ctx, e.caller, flowID)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.TaskType == flows.TaskSendInitiateWebhook {
			if err := taskreports.New(e.pool).TaskFailing(ctx, e.caller.OrganizationID, task.ID, "connection refused"); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("flow %s has no webhook delivery task", flowID)
}

// TestTheOrganizationWithdrawsAnAcceptance: the organization's withdrawal
// takes the journey's path: under the flow's lock it checks the If-Match,
// signs a receipt naming the acceptance's and the organization, records it
// with flow.withdrawn, and runs the caller's work in the same transaction
// with the flow as a retrieve shows it; when the work fails, nothing stays.
func TestTheOrganizationWithdrawsAnAcceptance(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	c, token := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true, Language: "nb"}); err != nil {
		t.Fatal(err)
	}
	e.openIncident(t, c.FlowID)
	accepted := e.get(t, c.FlowID)
	open, _ := e.create(t, "https://bank.example/done")
	rejected, rejectToken := e.create(t, "https://bank.example/done")
	if _, err := e.journey.Decide(ctx, rejectToken, me, consent.Answer{Accept: false}); err != nil {
		t.Fatal(err)
	}
	stale, err := etag.ParseIfMatch([]string{`"v1"`})
	if err != nil {
		t.Fatal(err)
	}
	current, err := etag.ParseIfMatch([]string{accepted.ETag()})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("the audit log refused the entry")
	for _, tt := range []struct {
		name   string
		caller flows.Caller
		flowID string
		cond   etag.IfMatch
		before database.BeforeCommit[flows.Flow]
		want   func(error) bool
	}{
		{"another organization's flow", flows.Caller{OrganizationID: "org-2"}, c.FlowID, etag.Any, nil,
			func(err error) bool { return errors.Is(err, flows.ErrNotFound) }},
		{"an open flow", e.caller, open.FlowID, etag.Any, nil, func(err error) bool { return errors.Is(err, flows.ErrNotAccepted) }},
		{"a rejection", e.caller, rejected.FlowID, etag.Any, nil, func(err error) bool { return errors.Is(err, flows.ErrNotAccepted) }},
		{"an If-Match of an earlier state", e.caller, c.FlowID, stale, nil,
			func(err error) bool { return apperr.CodeOf(err) == apperr.PreconditionFailed }},
		{"work that fails", e.caller, c.FlowID, current, func(context.Context, database.Tx, flows.Flow) error { return refused },
			func(err error) bool { return errors.Is(err, refused) }},
	} {
		if _, err := e.withdrawals.Withdraw(ctx, tt.caller, tt.flowID, tt.cond, tt.before); !tt.want(err) {
			t.Errorf("withdrawing %s = %v", tt.name, err)
		}
	}
	if f := e.get(t, c.FlowID); f.ConsentStatus != flows.Accepted || f.Version != accepted.Version || f.NumAttachments != 1 {
		t.Fatalf("refused withdrawals changed the flow: %s version %d, %d receipts", f.ConsentStatus, f.Version, f.NumAttachments)
	}
	if got := strings.Join(e.events(t, c.FlowID), " "); got != "flow.created flow.accepted" {
		t.Fatalf("events after refused withdrawals: %s", got)
	}

	var seen flows.Flow
	got, err := e.withdrawals.Withdraw(ctx, e.caller, c.FlowID, current, func(ctx context.Context, tx database.Tx, f flows.Flow) error {
		seen = f
		_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, status, flow_status, version) values ('probe', $1, '', '', 0)`, f.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.ConsentStatus != flows.Withdrawn || got.WithdrawnBy != flows.ByOrganization || got.WithdrawnAt == nil ||
		got.Version != accepted.Version+1 || got.NumAttachments != 2 {
		t.Fatalf("withdrawn: %+v", got)
	}
	if after := e.get(t, c.FlowID); !reflect.DeepEqual(got, after) || !reflect.DeepEqual(seen, after) {
		t.Fatalf("the withdrawal answered %+v\nand its work saw %+v\nwhile a retrieve shows %+v", got, seen, after)
	}
	if len(got.Incidents) != 1 || got.ConsentURL != c.ConsentURL {
		t.Fatalf("the withdrawn flow's incidents %+v and link %q", got.Incidents, got.ConsentURL)
	}
	if got := strings.Join(e.events(t, c.FlowID), " "); got != "flow.created flow.accepted flow.withdrawn probe" {
		t.Fatalf("events: %s", got)
	}
	receipts := e.receiptsOf(t, c.FlowID)
	if len(receipts) != 2 {
		t.Fatalf("%d receipts, want the acceptance's and the withdrawal's", len(receipts))
	}
	first, second := receipts[0], receipts[1]
	if second.Decision != flows.DecisionWithdrawn || second.WithdrawnBy != flows.ByOrganization || second.Previous != first.ID ||
		second.Subject != first.Subject || second.Definition != first.Definition || second.Definition.Language != "nb" ||
		second.Recipient != "Acme Bank" || second.OrganizationName != "Acme Bank" || !second.IssuedAtTime().Equal(got.WithdrawnAt.Truncate(time.Second)) {
		t.Fatalf("the withdrawal's receipt %+v after the acceptance's %+v", second, first)
	}
	if _, err := e.withdrawals.Withdraw(ctx, e.caller, c.FlowID, etag.Any); !errors.Is(err, flows.ErrNotAccepted) {
		t.Fatalf("withdrawing twice = %v, want ErrNotAccepted", err)
	}
	var closed *consent.ClosedError
	if _, err := e.journey.Withdraw(ctx, token, me); !errors.As(err, &closed) || closed.Closure != consent.Withdrawn {
		t.Fatalf("the person's withdrawal after the organization's = %v, want closed as withdrawn", err)
	}
}

// TestConcurrentEndsOfAFlowRecordExactlyOne races what can end a flow: the
// decision against the organization's cancel and the expiry of the request,
// then the person's and the organization's withdrawals against the expiry
// of the acceptance. The flow's lock lets exactly one of each race change
// it, with exactly one event and no receipt but the winner's.
func TestConcurrentEndsOfAFlowRecordExactlyOne(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	race := func(fns ...func() error) []error {
		errs := make([]error, len(fns))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, fn := range fns {
			wg.Go(func() {
				<-start
				errs[i] = fn()
			})
		}
		close(start)
		wg.Wait()
		return errs
	}
	count := func(kinds []string, of ...string) int {
		n := 0
		for _, k := range kinds {
			for _, o := range of {
				if k == o {
					n++
				}
			}
		}
		return n
	}
	for round := range 4 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			c, token := e.create(t, "https://bank.example/done")
			errs := race(
				func() error { _, err := e.journey.Decide(ctx, token, me, consent.Answer{Accept: true}); return err },
				func() error { _, err := e.flows.Cancel(ctx, e.caller, c.FlowID, etag.Any); return err },
				// The request's expiry, as its job would see it an hour from now.
				func() error { _, err := e.flows.ExpireDue(ctx, time.Now().Add(2*time.Hour), 10); return err },
			)
			for i, err := range errs {
				if err != nil && !errors.Is(err, consent.ErrClosed) && !errors.Is(err, flows.ErrNotActive) {
					t.Fatalf("racer %d: %v", i, err)
				}
			}
			kinds := e.events(t, c.FlowID)
			f := e.get(t, c.FlowID)
			decided, cancelled := count(kinds, "flow.accepted"), count(kinds, "flow.cancelled")
			if decided+cancelled != 1 || (decided == 1) != (errs[0] == nil) || (decided == 1) != (f.ConsentStatus == flows.Accepted) ||
				f.NumAttachments != decided || f.Version != 2 {
				t.Fatalf("the decision's race: errors %v, events %v, flow %s %s version %d with %d receipts",
					errs, kinds, f.ConsentStatus, f.ProcessStatus, f.Version, f.NumAttachments)
			}
			if decided == 0 {
				return
			}
			if _, err := e.pool.Exec(ctx, `update flows set valid_until = now() - interval '1 second' where id = $1`, c.FlowID); err != nil {
				t.Fatal(err)
			}
			errs = race(
				func() error { _, err := e.journey.Withdraw(ctx, token, me); return err },
				func() error { _, err := e.withdrawals.Withdraw(ctx, e.caller, c.FlowID, etag.Any); return err },
				func() error { _, err := e.flows.ExpireDueAcceptances(ctx, 10); return err },
			)
			for i, err := range errs {
				if err != nil && !errors.Is(err, consent.ErrClosed) && !errors.Is(err, flows.ErrNotAccepted) {
					t.Fatalf("racer %d: %v", i, err)
				}
			}
			kinds = e.events(t, c.FlowID)
			f = e.get(t, c.FlowID)
			withdrawn, expired := count(kinds, "flow.withdrawn"), count(kinds, "flow.expired")
			won := 0
			for _, err := range errs[:2] {
				if err == nil {
					won++
				}
			}
			if withdrawn+expired != 1 || won != withdrawn || f.NumAttachments != 1+withdrawn || f.Version != 3 ||
				(withdrawn == 1) != (f.ConsentStatus == flows.Withdrawn) || (expired == 1) != (f.ConsentStatus == flows.Expired) {
				t.Fatalf("the withdrawals' race: errors %v, events %v, flow %s version %d with %d receipts",
					errs, kinds, f.ConsentStatus, f.Version, f.NumAttachments)
			}
		})
	}
}
