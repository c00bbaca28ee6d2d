package staff

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
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
	sessions *SessionStore
	staff    *AccountService
	ada      Account
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
	if f.staff, err = NewAccounts(pool, everyOrganization{}, Config{PasswordParams: secrethash.Cheap}); err != nil {
		t.Fatal(err)
	}
	if f.ada, err = f.staff.CreateStaff(context.Background(), NewAccount{OrganizationID: "org-a",
		Username: "ada", Role: RoleAdmin, Password: "a long enough password"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// signIn stores a provider session and a console session signed in through
// it, as one sign-in of ada makes them, and returns their tokens.
func (f *sessionsFixture) signIn(t *testing.T) (provider, console Session, consoleToken string) {
	t.Helper()
	ctx := context.Background()
	base := Session{Issuer: "https://flowd.example", Subject: f.ada.ID, StaffID: f.ada.ID, OrganizationID: "org-a",
		Username: "ada", UserAgent: "Firefox on Linux", Address: "192.0.2.7",
		CreatedAt: f.now, IdleUntil: f.now.Add(30 * time.Minute), ExpiresAt: f.now.Add(12 * time.Hour)}
	p := base
	p.Kind = SessionProvider
	provider, err := f.sessions.StartSession(ctx, NewSession{Session: p, Token: newToken(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := base
	c.Kind, c.ProviderSessionID = SessionConsole, provider.ID
	consoleToken = newToken(t)
	if console, err = f.sessions.StartSession(ctx, NewSession{Session: c, Token: consoleToken}); err != nil {
		t.Fatal(err)
	}
	return provider, console, consoleToken
}

func ids(sessions []Session) []string {
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
	if err != nil || !ok || got.ID != console.ID || got.StaffID != f.ada.ID || got.Kind != SessionConsole {
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

	if _, err := f.sessions.EndSession(ctx, "org-b", console.ID); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("another organization ended a session: %v", err)
	}
	var audited []string
	ended, err := f.sessions.EndSessionByToken(ctx, token, func(_ context.Context, _ database.Tx, done []Session) error {
		audited = ids(done)
		return nil
	})
	if want := ids([]Session{provider, console}); err != nil || !slices.Equal(ids(ended), want) || !slices.Equal(audited, want) {
		t.Fatalf("ended %v (hook saw %v), want %v: %v", ids(ended), audited, want, err)
	}
	live, err := f.sessions.ListSessions(ctx, "org-a", nil)
	if want := ids([]Session{otherProvider, otherConsole}); err != nil || !slices.Equal(ids(live), want) {
		t.Fatalf("live after the sign-out: %v, want %v (%v)", ids(live), want, err)
	}
	if ended, err := f.sessions.EndSession(ctx, "org-a", otherProvider.ID); err != nil || len(ended) != 2 {
		t.Fatalf("ending a provider session ended %v (%v), want it and its console session", ids(ended), err)
	}

	// A failing hook undoes the end.
	_, console, _ = f.signIn(t)
	refuse := errors.New("no audit")
	if _, err := f.sessions.EndSession(ctx, "org-a", console.ID, func(context.Context, database.Tx, []Session) error { return refuse }); !errors.Is(err, refuse) {
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
	if ch, err := f.staff.SetStaffRole(ctx, "ada", RoleAdmin); err != nil || len(ch.Ended) != 0 {
		t.Fatalf("the same role ended %d sessions (%v)", len(ch.Ended), err)
	}
	if ch, err := f.staff.ResetStaffPassword(ctx, "ADA", "another long password"); err != nil || len(ch.Ended) != 4 {
		t.Fatalf("a password reset ended %d sessions, want 4 (%v)", len(ch.Ended), err)
	}
	f.signIn(t)
	if ch, err := f.staff.SetStaffRole(ctx, "ada", RoleViewer); err != nil || len(ch.Ended) != 2 || ch.Account.Role != RoleViewer {
		t.Fatalf("a role change: %+v (%v)", ch, err)
	}
	f.signIn(t)
	if ch, err := f.staff.DeleteStaff(ctx, "ada"); err != nil || len(ch.Ended) != 2 || ch.Account.ID != f.ada.ID {
		t.Fatalf("a deletion: %+v (%v)", ch, err)
	}
	if _, err := f.staff.StaffByID(ctx, f.ada.ID); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("the deleted account: %v", err)
	}
	if _, err := f.staff.SetStaffRole(ctx, "ada", Role("owner")); apperr.CodeOf(err) != apperr.Invalid {
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
	if _, err := f.sessions.Session(ctx, "org-a", idle.ID); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("the idle session: %v", err)
	}
	if _, err := f.sessions.Session(ctx, "org-a", live.ID); err != nil {
		t.Fatalf("the live session: %v", err)
	}
}

func TestSummarizeUserAgent(t *testing.T) {
	t.Parallel()
	tests := []struct{ ua, want string }{
		{"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge on Windows"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari on macOS"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iOS"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "Chrome on Android"},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0.0.0 Safari/537.36", "Headless Chrome on Linux"},
		{"curl/8.5.0", "curl"},
		{"Go-http-client/1.1", "Go-http-client"},
		{"", "unknown browser"},
		{"evil\x00\nname/1", "evilname"},
		{strings.Repeat("x", 500), strings.Repeat("x", 40)},
	}
	for _, tt := range tests {
		if got := SummarizeUserAgent(tt.ua); got != tt.want {
			t.Errorf("SummarizeUserAgent(%q) = %q, want %q", tt.ua, got, tt.want)
		}
	}
}

func TestSessionAuditEntries(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ended := []Session{
		{ID: "s1", Kind: SessionConsole, OrganizationID: "org-a", Username: "ada", UserAgent: "Firefox on Linux", Address: "192.0.2.7", CreatedAt: at},
		{ID: "s2", Kind: SessionConsent, Subject: "eid-1", CreatedAt: at},
	}
	out := SessionAuditEntries("staff:bob", EndedByAdmin, ended)
	if len(out) != 1 {
		t.Fatalf("entries %+v, want one: consent sessions belong to no organization", out)
	}
	e := out[0]
	want := "console session s1 started 2030-01-02T03:04:05Z, Firefox on Linux, from 192.0.2.7: ended by an admin"
	if e.Action != identity.AuditSessionEnd || e.Actor != "staff:bob" || e.Target != "ada" || e.OrganizationID != "org-a" || e.Detail != want {
		t.Fatalf("entry %+v", e)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	out = SessionAuditEntries("staff:ada", "", ended[:1])
	if len(out) != 1 || out[0].Action != identity.AuditSessionSignOut || out[0].Detail != strings.TrimSuffix(want, ": ended by an admin") {
		t.Fatalf("sign-out entries %+v", out)
	}
}

// everyOrganization says that every organization exists.
type everyOrganization struct{}

func (everyOrganization) OrganizationExists(context.Context, string) (bool, error) { return true, nil }

func TestConstructorsRefuseAMissingCollaborator(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	if _, err := NewAccounts(pool, nil, Config{}); err == nil {
		t.Error("NewAccounts without Organizations")
	}
	if _, err := NewAccounts(nil, everyOrganization{}, Config{}); err == nil {
		t.Error("NewAccounts without a pool")
	}
	if _, err := NewSessions(nil, SessionsConfig{Log: slog.New(slog.DiscardHandler)}); err == nil {
		t.Error("NewSessions without a pool")
	}
	if _, err := NewSessions(pool, SessionsConfig{}); err == nil {
		t.Error("NewSessions without a logger")
	}
}
