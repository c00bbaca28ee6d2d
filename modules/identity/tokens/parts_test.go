package tokens

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// auditHook records an entry of action in the transaction it is given,
// naming as its target what target reads from the action's result. bad
// makes the entry fail validation, as a broken audit write would fail.
func auditHook[T any](m *instance, org, action string, bad bool, target func(T) string) database.BeforeCommit[T] {
	return func(ctx context.Context, tx database.Tx, done T) error {
		e := identity.AuditEntry{OrganizationID: org, Actor: "staff:ada", Action: action, Target: target(done)}
		if bad {
			e.Actor = ""
		}
		return m.RecordAuditTx(ctx, tx, e)
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
			ClientAuth: ClientAuth{ClientID: id, ClientSecret: secret, AuthMethod: identity.AuthSecretPost, RemoteAddr: "192.0.2.7"}})
		var te *TokenError
		if err != nil && !errors.As(err, &te) {
			t.Fatal(err)
		}
		return err == nil
	}
	victim, err := f.m.CreateClient(ctx, orgs.NewClient{OrganizationID: org, Name: "Victim"})
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
		{identity.AuditClientCreate, func(t *testing.T, bad bool) (string, error) {
			cc, err := f.m.CreateClient(ctx, orgs.NewClient{OrganizationID: org, Name: "Backend"},
				auditHook(f.m, org, identity.AuditClientCreate, bad, func(cc orgs.ClientCredentials) string { return cc.ID }))
			return cc.ID, err
		}, func(t *testing.T) bool { return countClients(t) == 3 }},
		{identity.AuditClientRotate, func(t *testing.T, bad bool) (string, error) {
			cc, err := f.m.RotateClientSecret(ctx, org, victim.ID,
				auditHook(f.m, org, identity.AuditClientRotate, bad, func(cc orgs.ClientCredentials) string { return cc.ID }))
			rotated = cc.Secret
			return victim.ID, err
		}, func(t *testing.T) bool {
			old := secretWorks(t, victim.ID, victim.Secret)
			return !old && rotated != "" && secretWorks(t, victim.ID, rotated)
		}},
		{identity.AuditClientRevoke, func(t *testing.T, bad bool) (string, error) {
			_, err := f.m.RevokeClient(ctx, org, victim.ID,
				auditHook(f.m, org, identity.AuditClientRevoke, bad, func(c orgs.Client) string { return c.ID }))
			return victim.ID, err
		}, func(t *testing.T) bool {
			c, err := f.m.Client(ctx, victim.ID)
			if err != nil {
				t.Fatal(err)
			}
			return c.Revoked()
		}},
		{identity.AuditSettingsUpdate, func(t *testing.T, bad bool) (string, error) {
			_, err := f.m.UpdateOrganization(ctx, orgs.OrganizationUpdate{ID: org, ReferencePrefix: "NEW"},
				auditHook(f.m, org, identity.AuditSettingsUpdate, bad, func(ch orgs.OrganizationChange) string { return ch.After.ReferencePrefix }))
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

// TestSetClientRateLimit: a client's own limit reaches its verified tokens
// at once on this instance and, through the change's notification, on
// another; an invalid limit, another organization's client and a revoked
// client are refused; only a change runs the audit hook; the default comes
// back with a zero RateLimit.
func TestSetClientRateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *testConfig) { c.APIRateLimit = 600 })
	ctx := context.Background()
	other := f.another(t, nil)
	other.run(t)
	tok := f.token(t).AccessToken
	limitOn := func(m *instance) int {
		t.Helper()
		p, err := m.VerifyAccessToken(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		return m.AdmitAPIRequest(p).Limit
	}
	if got := limitOn(f.m); got != 600 {
		t.Fatalf("limit %d before any change, want the default 600", got)
	}
	// The other instance caches the client's state only while it listens.
	deadline := testwait.Deadline(t)
	for !other.feed.Listening() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := limitOn(other); got != 600 {
		t.Fatalf("limit %d on the other instance, want 600", got)
	}

	var hooked []orgs.ClientChange
	hook := func(_ context.Context, _ database.Tx, ch orgs.ClientChange) error {
		hooked = append(hooked, ch)
		return nil
	}
	c, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, identity.RateLimit{Own: true, PerMinute: 3}, hook)
	if err != nil || c.RateLimit != (identity.RateLimit{Own: true, PerMinute: 3}) || len(hooked) != 1 || hooked[0].Before.RateLimit.Own {
		t.Fatalf("set: %+v %v, hook saw %+v", c, err, hooked)
	}
	if got := limitOn(f.m); got != 3 {
		t.Fatalf("limit %d on this instance after the change, want 3", got)
	}
	for got := limitOn(other); got != 3; got = limitOn(other) {
		if time.Now().After(deadline) {
			t.Fatalf("the other instance still applies %d", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, identity.RateLimit{Own: true, PerMinute: 3}, hook); err != nil || len(hooked) != 1 {
		t.Fatalf("the same limit again: %v, hook ran %d times", err, len(hooked))
	}
	for _, bad := range []int{-1, identity.MaxRateLimit + 1} {
		if _, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, identity.RateLimit{Own: true, PerMinute: bad}); apperr.CodeOf(err) != apperr.Invalid {
			t.Fatalf("limit %d: %v", bad, err)
		}
	}
	org, err := f.m.CreateOrganization(ctx, orgs.NewOrganization{Name: "Other Bank"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.SetClientRateLimit(ctx, org.ID, f.client.ID, identity.RateLimit{}); !errors.Is(err, orgs.ErrClientNotFound) {
		t.Fatalf("another organization's client: %v", err)
	}
	if c, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, identity.RateLimit{}, hook); err != nil || c.RateLimit.Own || len(hooked) != 2 {
		t.Fatalf("back to the default: %+v %v", c, err)
	}
	if got := limitOn(f.m); got != 600 {
		t.Fatalf("limit %d after returning to the default", got)
	}
	if _, err := f.m.RevokeClient(ctx, f.org.ID, f.client.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, identity.RateLimit{Own: true, PerMinute: 9}); !errors.Is(err, orgs.ErrClientNotFound) {
		t.Fatalf("a revoked client: %v", err)
	}
}
