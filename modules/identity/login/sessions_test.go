package login

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity"
)

func newToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionsFixture is the session records of a fresh database, with a clock
// the test sets, and a staff account.
type sessionsFixture struct {
	sessions *Sessions
	staff    *Staff
	ada      identity.StaffAccount
	now      time.Time
}

func newSessionsFixture(t *testing.T) *sessionsFixture {
	t.Helper()
	pool := dbtest.New(t)
	f := &sessionsFixture{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	var err error
	if f.sessions, err = NewSessions(pool, SessionsConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return f.now }}); err != nil {
		t.Fatal(err)
	}
	if f.staff, err = NewStaff(pool, everyOrganization{}, StaffConfig{PasswordParams: secrethash.Cheap}); err != nil {
		t.Fatal(err)
	}
	if f.ada, err = f.staff.CreateStaff(context.Background(), identity.NewStaffAccount{OrganizationID: "org-a",
		Username: "ada", Role: identity.RoleAdmin, Password: "a long enough password"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// signIn stores a provider session and a console session signed in through
// it, as one sign-in of ada makes them, and returns their tokens.
func (f *sessionsFixture) signIn(t *testing.T) (provider, console identity.Session, consoleToken string) {
	t.Helper()
	ctx := context.Background()
	base := identity.Session{Issuer: "https://flowd.example", Subject: f.ada.ID, StaffID: f.ada.ID, OrganizationID: "org-a",
		Username: "ada", UserAgent: "Firefox on Linux", Address: "192.0.2.7",
		CreatedAt: f.now, IdleUntil: f.now.Add(30 * time.Minute), ExpiresAt: f.now.Add(12 * time.Hour)}
	p := base
	p.Kind = identity.SessionProvider
	provider, err := f.sessions.StartSession(ctx, identity.NewSession{Session: p, Token: newToken(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := base
	c.Kind, c.ProviderSessionID = identity.SessionConsole, provider.ID
	consoleToken = newToken(t)
	if console, err = f.sessions.StartSession(ctx, identity.NewSession{Session: c, Token: consoleToken}); err != nil {
		t.Fatal(err)
	}
	return provider, console, consoleToken
}

func ids(sessions []identity.Session) []string {
	var out []string
	for _, s := range sessions {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

// TestSessionRecordsKeepOnlyAHashOfTheToken: the token finds its session,
// and no column holds it.
func TestSessionRecordsKeepOnlyAHashOfTheToken(t *testing.T) {
	t.Parallel()
	f := newSessionsFixture(t)
	ctx := context.Background()
	_, console, token := f.signIn(t)
	got, ok, err := f.sessions.SessionByToken(ctx, token)
	if err != nil || !ok || got.ID != console.ID || got.StaffID != f.ada.ID || got.Kind != identity.SessionConsole {
		t.Fatalf("by token: %+v %v %v", got, ok, err)
	}
	var holding int
	if err := f.sessions.pool.QueryRow(ctx, `select count(*) from login_sessions s
		where position($1 in s::text) > 0 or position(convert_to($1, 'UTF8') in token_hash) > 0`, token).Scan(&holding); err != nil {
		t.Fatal(err)
	}
	if holding != 0 {
		t.Fatalf("%d rows hold the token itself", holding)
	}
	if _, ok, _ := f.sessions.SessionByToken(ctx, newToken(t)); ok {
		t.Fatal("an unknown token found a session")
	}
}

// TestEndingASessionEndsItsSignIn: a console session ends with the provider
// session it was signed in through, and the other way round; a sign-in of
// the same person elsewhere lives on. Ending needs the session's organization.
func TestEndingASessionEndsItsSignIn(t *testing.T) {
	t.Parallel()
	f := newSessionsFixture(t)
	ctx := context.Background()
	provider, console, token := f.signIn(t)
	otherProvider, otherConsole, _ := f.signIn(t)

	if _, err := f.sessions.EndSession(ctx, "org-b", console.ID); !errors.Is(err, identity.ErrSessionNotFound) {
		t.Fatalf("another organization ended a session: %v", err)
	}
	var audited []string
	ended, err := f.sessions.EndSessionByToken(ctx, token, func(_ context.Context, _ database.Tx, done []identity.Session) error {
		audited = ids(done)
		return nil
	})
	if want := ids([]identity.Session{provider, console}); err != nil || !slices.Equal(ids(ended), want) || !slices.Equal(audited, want) {
		t.Fatalf("ended %v (hook saw %v), want %v: %v", ids(ended), audited, want, err)
	}
	live, err := f.sessions.ListSessions(ctx, "org-a", nil)
	if want := ids([]identity.Session{otherProvider, otherConsole}); err != nil || !slices.Equal(ids(live), want) {
		t.Fatalf("live after the sign-out: %v, want %v (%v)", ids(live), want, err)
	}
	if ended, err := f.sessions.EndSession(ctx, "org-a", otherProvider.ID); err != nil || len(ended) != 2 {
		t.Fatalf("ending a provider session ended %v (%v), want it and its console session", ids(ended), err)
	}

	// A failing hook undoes the end.
	_, console, _ = f.signIn(t)
	refuse := errors.New("no audit")
	if _, err := f.sessions.EndSession(ctx, "org-a", console.ID, func(context.Context, database.Tx, []identity.Session) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("hook error: %v", err)
	}
	if _, err := f.sessions.Session(ctx, "org-a", console.ID); err != nil {
		t.Fatalf("the session ended although its audit failed: %v", err)
	}
}

// TestStaffChangesEndEverySessionOfTheAccount: a password reset, a role
// change and a deletion end every session of the account, in the change's
// transaction; a role set to the one the account has ends nothing.
func TestStaffChangesEndEverySessionOfTheAccount(t *testing.T) {
	t.Parallel()
	f := newSessionsFixture(t)
	ctx := context.Background()
	f.signIn(t)
	f.signIn(t)
	if ch, err := f.staff.SetStaffRole(ctx, "ada", identity.RoleAdmin); err != nil || len(ch.Ended) != 0 {
		t.Fatalf("the same role ended %d sessions (%v)", len(ch.Ended), err)
	}
	if ch, err := f.staff.ResetStaffPassword(ctx, "ADA", "another long password"); err != nil || len(ch.Ended) != 4 {
		t.Fatalf("a password reset ended %d sessions, want 4 (%v)", len(ch.Ended), err)
	}
	f.signIn(t)
	if ch, err := f.staff.SetStaffRole(ctx, "ada", identity.RoleViewer); err != nil || len(ch.Ended) != 2 || ch.Account.Role != identity.RoleViewer {
		t.Fatalf("a role change: %+v (%v)", ch, err)
	}
	f.signIn(t)
	if ch, err := f.staff.DeleteStaff(ctx, "ada"); err != nil || len(ch.Ended) != 2 || ch.Account.ID != f.ada.ID {
		t.Fatalf("a deletion: %+v (%v)", ch, err)
	}
	if _, err := f.staff.StaffByID(ctx, f.ada.ID); !errors.Is(err, identity.ErrStaffNotFound) {
		t.Fatalf("the deleted account: %v", err)
	}
	if _, err := f.staff.SetStaffRole(ctx, "ada", identity.Role("owner")); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("an unknown role: %v", err)
	}
}

// TestSweepDeletesOnlyTimedOutSessions: the sweep keeps live sessions and
// deletes those past their idle or absolute deadline.
func TestSweepDeletesOnlyTimedOutSessions(t *testing.T) {
	t.Parallel()
	f := newSessionsFixture(t)
	ctx := context.Background()
	_, idle, _ := f.signIn(t) // its idle deadline is 30 minutes on
	f.now = f.now.Add(20 * time.Minute)
	_, live, _ := f.signIn(t)
	f.now = f.now.Add(15 * time.Minute)
	if n, err := f.sessions.SweepExpired(ctx); err != nil || n != 2 {
		t.Fatalf("swept %d (%v), want the first sign-in's 2", n, err)
	}
	if _, err := f.sessions.Session(ctx, "org-a", idle.ID); !errors.Is(err, identity.ErrSessionNotFound) {
		t.Fatalf("the idle session: %v", err)
	}
	if _, err := f.sessions.Session(ctx, "org-a", live.ID); err != nil {
		t.Fatalf("the live session: %v", err)
	}
}
