package identity

import (
	"context"
	"errors"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
)

// auditHook records an entry of action in the transaction it is given,
// naming as its target what target reads from the action's result. bad
// makes the entry fail validation, as a broken audit write would fail.
func auditHook[T any](m *Module, org, action string, bad bool, target func(T) string) database.BeforeCommit[T] {
	return func(ctx context.Context, tx database.Tx, done T) error {
		e := AuditEntry{OrganizationID: org, Actor: "staff:ada", Action: action, Target: target(done)}
		if bad {
			e.Actor = ""
		}
		return m.RecordAuditTx(ctx, tx, e)
	}
}

// TestRecordAuditTxCommitsWithItsTransaction: an entry recorded in a
// transaction is there only if that transaction commits, and a bad entry is
// refused with the fields that are wrong.
func TestRecordAuditTxCommitsWithItsTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	rollback := errors.New("roll back")
	err := database.WithTx(ctx, f.m.pool, func(tx database.Tx) error {
		if err := f.m.RecordAuditTx(ctx, tx, AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: AuditFlowCancel, Target: "TB-1"}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	err = database.WithTx(ctx, f.m.pool, func(tx database.Tx) error {
		return f.m.RecordAuditTx(ctx, tx, AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: AuditFlowCancel, Target: "TB-2"})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = database.WithTx(ctx, f.m.pool, func(tx database.Tx) error {
		return f.m.RecordAuditTx(ctx, tx, AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: "Not An Action"})
	})
	if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || len(e.Fields) != 1 || e.Fields[0].Field != "action" {
		t.Fatalf("a bad entry: %v, want Invalid naming action", err)
	}
	log, _, err := f.m.AuditLog(ctx, f.org.ID, 10, 0)
	if err != nil || len(log) != 1 || log[0].Target != "TB-2" {
		t.Fatalf("audit log %+v %v, want only the committed entry TB-2", log, err)
	}
}

// TestClientAndSettingsActionsCommitWithTheirAuditEntry runs each identity
// action the console audits with a hook whose audit write fails, which must
// leave everything as it was, and then with one that succeeds, which must
// leave both the change and its entry.
func TestClientAndSettingsActionsCommitWithTheirAuditEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	org := f.org.ID
	countClients := func(t *testing.T) int {
		cl, err := f.m.ListClients(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		return len(cl)
	}
	secretWorks := func(t *testing.T, id, secret string) bool {
		_, err := f.m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials,
			ClientAuth: ClientAuth{ClientID: id, ClientSecret: secret, AuthMethod: AuthSecretPost, RemoteAddr: "192.0.2.7"}})
		var te *TokenError
		if err != nil && !errors.As(err, &te) {
			t.Fatal(err)
		}
		return err == nil
	}
	victim, err := f.m.CreateClient(ctx, NewClient{OrganizationID: org, Name: "Victim"})
	if err != nil {
		t.Fatal(err)
	}
	var rotated string

	tests := []struct {
		action string
		// run does the action with its audit write failing or not, and
		// returns the target the entry must name.
		run func(t *testing.T, bad bool) (string, error)
		// done reports whether the action's change is there.
		done func(t *testing.T) bool
	}{
		{AuditClientCreate, func(t *testing.T, bad bool) (string, error) {
			cc, err := f.m.CreateClient(ctx, NewClient{OrganizationID: org, Name: "Backend"},
				auditHook(f.m, org, AuditClientCreate, bad, func(cc ClientCredentials) string { return cc.ID }))
			return cc.ID, err
		}, func(t *testing.T) bool { return countClients(t) == 3 }},
		{AuditClientRotate, func(t *testing.T, bad bool) (string, error) {
			cc, err := f.m.RotateClientSecret(ctx, org, victim.ID,
				auditHook(f.m, org, AuditClientRotate, bad, func(cc ClientCredentials) string { return cc.ID }))
			rotated = cc.Secret
			return victim.ID, err
		}, func(t *testing.T) bool {
			old := secretWorks(t, victim.ID, victim.Secret)
			return !old && rotated != "" && secretWorks(t, victim.ID, rotated)
		}},
		{AuditClientRevoke, func(t *testing.T, bad bool) (string, error) {
			_, err := f.m.RevokeClient(ctx, org, victim.ID,
				auditHook(f.m, org, AuditClientRevoke, bad, func(c Client) string { return c.ID }))
			return victim.ID, err
		}, func(t *testing.T) bool {
			c, err := f.m.Client(ctx, victim.ID)
			if err != nil {
				t.Fatal(err)
			}
			return c.Revoked()
		}},
		{AuditSettingsUpdate, func(t *testing.T, bad bool) (string, error) {
			_, err := f.m.UpdateOrganization(ctx, OrganizationUpdate{ID: org, ReferencePrefix: "NEW"},
				auditHook(f.m, org, AuditSettingsUpdate, bad, func(ch OrganizationChange) string { return ch.After.ReferencePrefix }))
			return "NEW", err
		}, func(t *testing.T) bool {
			o, err := f.m.Organization(ctx, org)
			if err != nil {
				t.Fatal(err)
			}
			return o.ReferencePrefix == "NEW"
		}},
	}
	// The cases run in order on one organization: the rotation needs the
	// client the revocation then stops.
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			if _, err := tt.run(t, true); apperr.CodeOf(err) != apperr.Invalid {
				t.Fatalf("with a failing audit write: %v, want the entry's Invalid error", err)
			}
			if tt.done(t) {
				t.Fatal("the action took effect although its audit entry was not written")
			}
			target, err := tt.run(t, false)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.done(t) {
				t.Fatal("the action did not take effect")
			}
			log, _, err := f.m.AuditLog(ctx, org, 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			for _, e := range log {
				if e.Action == tt.action {
					n++
					if e.Target != target || target == "" {
						t.Errorf("entry names %q, want %q", e.Target, target)
					}
				}
			}
			if n != 1 {
				t.Fatalf("%d entries of %s, want 1: %+v", n, tt.action, log)
			}
		})
	}
}

// TestUpdateOrganizationShowsItsHookWhatItReplaced: the hook sees the
// settings the update replaced as read in its own transaction, so of two
// admins saving one after the other, the second entry starts from the
// first one's result and not from a page loaded before it.
func TestUpdateOrganizationShowsItsHookWhatItReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	org := f.org.ID
	var changes []OrganizationChange
	record := func(ctx context.Context, tx database.Tx, ch OrganizationChange) error {
		changes = append(changes, ch)
		return nil
	}
	for _, prefix := range []string{"FIRST", "SECOND"} {
		if _, err := f.m.UpdateOrganization(ctx, OrganizationUpdate{ID: org, ReferencePrefix: prefix}, record); err != nil {
			t.Fatal(err)
		}
	}
	if len(changes) != 2 {
		t.Fatalf("the hook ran %d times, want 2", len(changes))
	}
	if got := changes[0].Before.ReferencePrefix; got != f.org.ReferencePrefix {
		t.Errorf("first update: before %q, want the seeded %q", got, f.org.ReferencePrefix)
	}
	if got := changes[1].Before.ReferencePrefix; got != "FIRST" {
		t.Errorf("second update: before %q, want FIRST", got)
	}
	if got := changes[1].After.ReferencePrefix; got != "SECOND" {
		t.Errorf("second update: after %q, want SECOND", got)
	}
}
