package tokens

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// auth is the fixture client's authentication at the provider's endpoints.
func (f fixture) auth() ClientAuth {
	return ClientAuth{ClientID: f.client.ID, ClientSecret: f.client.Secret, AuthMethod: identity.AuthSecretBasic, RemoteAddr: "192.0.2.1"}
}

// otherClient makes a second client of the fixture's organization.
func (f fixture) otherClient(t *testing.T) orgs.ClientCredentials {
	t.Helper()
	cc, err := f.m.CreateClient(context.Background(), orgs.NewClient{OrganizationID: f.org.ID, Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// listening runs the change feed of a second instance on the fixture's database and
// waits until its revoked set is complete.
func (f fixture) listening(t *testing.T) *instance {
	t.Helper()
	other := f.another(t, nil)
	other.run(t)
	waitFor(t, "the listener and its revoked set", func() bool {
		_, complete := other.revoked.Has("")
		return complete
	})
	return other
}

// auditActions returns the actions of the organization's audit log, newest first.
func (f fixture) auditActions(t *testing.T) []string {
	t.Helper()
	entries, _, err := f.m.AuditLog(context.Background(), f.org.ID, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Action+" "+e.Actor+" "+e.Target)
	}
	return out
}

// TestRevokedAccessTokenIsRefusedEverywhere revokes an access token on one
// instance: that instance refuses it at once, a listening instance that had
// admitted it refuses it once the notification arrives, and an instance
// without a listener reads the database. Another token of the client works on.
func TestRevokedAccessTokenIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	listening := f.listening(t)
	cold := f.another(t, nil) // no feed: every check reads the database
	tok, kept := f.token(t), f.token(t)
	for _, m := range []*instance{f.m, listening, cold} {
		if _, err := m.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
			t.Fatalf("before revocation: %v", err)
		}
	}
	if err := f.m.Revoke(ctx, ClientTokenRequest{ClientAuth: f.auth(), Token: tok.AccessToken, TokenTypeHint: TokenTypeAccess}); err != nil {
		t.Fatal(err)
	}
	assertInvalid(t, f.m, tok.AccessToken, "revoked on this instance")
	assertInvalid(t, cold, tok.AccessToken, "revoked, read from the database")
	waitFor(t, "the revocation to reach the listening instance", func() bool {
		_, err := listening.VerifyAccessToken(ctx, tok.AccessToken)
		return err != nil
	})
	assertInvalid(t, listening, tok.AccessToken, "revoked on another instance")
	for _, m := range []*instance{f.m, listening, cold} {
		if _, err := m.VerifyAccessToken(ctx, kept.AccessToken); err != nil {
			t.Fatalf("another token of the client: %v", err)
		}
	}
	// Revoking again changes nothing and is no error.
	if err := f.m.Revoke(ctx, ClientTokenRequest{ClientAuth: f.auth(), Token: tok.AccessToken}); err != nil {
		t.Fatal(err)
	}
	got := f.auditActions(t)
	if len(got) != 1 || !strings.HasPrefix(got[0], identity.AuditAccessTokenRevoke+" client:"+f.client.ID+" jti ") {
		t.Fatalf("audit log %q, want one access_token.revoke by the client", got)
	}
}

// TestRevokingARefreshTokenRevokesItsFamily revokes a used refresh token:
// its successor stops working too, and the revocation is audited once.
func TestRevokingARefreshTokenRevokesItsFamily(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	first := f.token(t)
	second, err := f.m.Token(ctx, TokenRequest{ClientAuth: f.auth(), GrantType: GrantRefreshToken, RefreshToken: first.RefreshToken})
	if err != nil {
		t.Fatal(err)
	}
	unrelated := f.token(t)
	for range 2 {
		if err := f.m.Revoke(ctx, ClientTokenRequest{ClientAuth: f.auth(), Token: first.RefreshToken, TokenTypeHint: TokenTypeRefresh}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.m.Token(ctx, TokenRequest{ClientAuth: f.auth(), GrantType: GrantRefreshToken, RefreshToken: second.RefreshToken})
	var te *TokenError
	if !errors.As(err, &te) || te.Code != ErrCodeInvalidGrant {
		t.Fatalf("refreshing with the revoked family's newest token: %v", err)
	}
	if _, err := f.m.Token(ctx, TokenRequest{ClientAuth: f.auth(), GrantType: GrantRefreshToken, RefreshToken: unrelated.RefreshToken}); err != nil {
		t.Fatalf("another family: %v", err)
	}
	got := f.auditActions(t)
	if len(got) != 1 || !strings.HasPrefix(got[0], identity.AuditRefreshTokenRevoke+" client:"+f.client.ID+" family ") {
		t.Fatalf("audit log %q, want one refresh_token.revoke by the client", got)
	}
}

// TestRevokeLeavesOtherClientsTokensAlone has a second client of the same
// organization revoke the first's tokens: no error, and nothing changes.
func TestRevokeLeavesOtherClientsTokensAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	other := f.otherClient(t)
	tok := f.token(t)
	otherAuth := ClientAuth{ClientID: other.ID, ClientSecret: other.Secret, AuthMethod: identity.AuthSecretPost}
	for _, raw := range []string{tok.AccessToken, tok.RefreshToken} {
		if err := f.m.Revoke(ctx, ClientTokenRequest{ClientAuth: otherAuth, Token: raw}); err != nil {
			t.Fatal(err)
		}
		if in, err := f.m.Introspect(ctx, ClientTokenRequest{ClientAuth: otherAuth, Token: raw}); err != nil || in != (Introspection{Requester: in.Requester}) {
			t.Fatalf("another client introspects: %+v %v", in, err)
		}
	}
	if _, err := f.m.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
		t.Fatalf("the access token after another client's revocation: %v", err)
	}
	if _, err := f.m.Token(ctx, TokenRequest{ClientAuth: f.auth(), GrantType: GrantRefreshToken, RefreshToken: tok.RefreshToken}); err != nil {
		t.Fatalf("the refresh token after another client's revocation: %v", err)
	}
	if got := f.auditActions(t); len(got) != 0 {
		t.Fatalf("audit log %q, want none", got)
	}
}

// TestRevokeAndIntrospectAuthenticateTheClient refuses what the token
// endpoint refuses, with the same errors.
func TestRevokeAndIntrospectAuthenticateTheClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	tok := f.token(t)
	wrong := f.auth()
	wrong.ClientSecret += "x"
	tests := []struct {
		name string
		req  ClientTokenRequest
		code string
	}{
		{"wrong secret", ClientTokenRequest{ClientAuth: wrong, Token: tok.AccessToken}, ErrCodeInvalidClient},
		{"no client", ClientTokenRequest{Token: tok.AccessToken}, ErrCodeInvalidClient},
		{"no token", ClientTokenRequest{ClientAuth: f.auth()}, ErrCodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var te *TokenError
			if err := f.m.Revoke(ctx, tt.req); !errors.As(err, &te) || te.Code != tt.code {
				t.Errorf("revoke: %v, want %s", err, tt.code)
			}
			if _, err := f.m.Introspect(ctx, tt.req); !errors.As(err, &te) || te.Code != tt.code {
				t.Errorf("introspect: %v, want %s", err, tt.code)
			}
		})
	}
	if _, err := f.m.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
		t.Fatalf("refused requests revoked the token: %v", err)
	}
}

// TestIntrospection answers an active token's claims and only Active false
// for every token that would not be accepted.
func TestIntrospection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	introspect := func(raw string) Introspection {
		t.Helper()
		in, err := f.m.Introspect(ctx, ClientTokenRequest{ClientAuth: f.auth(), Token: raw})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	tok := f.token(t)
	now := f.clock.now()
	in := introspect(tok.AccessToken)
	if !in.Active || in.TokenType != "Bearer" || in.ClientID != f.client.ID || in.Subject != f.client.ID || in.Scope != "flows:read flows:write" ||
		in.Audience != "flowd" || in.Issuer != testIssuer || in.JWTID == "" || in.OrganizationID != f.org.ID ||
		in.Expiry.Sub(now) < 290*time.Second || in.Expiry.Sub(now) > 310*time.Second || in.IssuedAt.IsZero() || in.NotBefore.IsZero() {
		t.Fatalf("active access token: %+v", in)
	}
	in = introspect(tok.RefreshToken)
	if !in.Active || in.TokenType != TokenTypeRefresh || in.ClientID != f.client.ID || in.Scope != "flows:read flows:write" ||
		in.JWTID != "" || in.Audience != "" || in.OrganizationID != f.org.ID || in.Expiry.Sub(now) < 1790*time.Second {
		t.Fatalf("active refresh token: %+v", in)
	}

	used := f.token(t)
	if _, err := f.m.Token(ctx, TokenRequest{ClientAuth: f.auth(), GrantType: GrantRefreshToken, RefreshToken: used.RefreshToken}); err != nil {
		t.Fatal(err)
	}
	revoked := f.token(t)
	for _, raw := range []string{revoked.AccessToken, revoked.RefreshToken} {
		if err := f.m.Revoke(ctx, ClientTokenRequest{ClientAuth: f.auth(), Token: raw}); err != nil {
			t.Fatal(err)
		}
	}
	forged := f.claims()
	inactive := map[string]string{
		"revoked access token":  revoked.AccessToken,
		"revoked refresh token": revoked.RefreshToken,
		"used refresh token":    used.RefreshToken,
		"unknown refresh token": "frt_unknown",
		"garbage":               "not.a.token",
		"foreign issuer":        f.sign(t, with(forged, "iss", "https://evil.example")),
		"no jti":                f.sign(t, with(forged, "jti", nil)),
	}
	for name, raw := range inactive {
		if in := introspect(raw); in != (Introspection{Requester: in.Requester}) {
			t.Errorf("%s: %+v, want inactive only", name, in)
		}
	}
	f.clock.advance(31 * time.Minute)
	for name, raw := range map[string]string{"expired access token": tok.AccessToken, "expired refresh token": tok.RefreshToken} {
		if in := introspect(raw); in != (Introspection{Requester: in.Requester}) {
			t.Errorf("%s: %+v, want inactive only", name, in)
		}
	}
}

// TestSweepForgetsExpiredRevocations deletes the revocation of a token
// once it has expired, and keeps one still needed.
func TestSweepForgetsExpiredRevocations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	expired, live := f.token(t), f.token(t)
	for _, tok := range []Token{expired, live} {
		if err := f.m.Revoke(ctx, ClientTokenRequest{ClientAuth: f.auth(), Token: tok.AccessToken}); err != nil {
			t.Fatal(err)
		}
	}
	jti := func(raw string) string {
		v, err := f.m.verifyToken(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return v.jti
	}
	if _, err := f.m.pool.Exec(ctx, "update revoked_access_tokens set expires_at = now() - interval '2 minutes' where jti = $1", jti(expired.AccessToken)); err != nil {
		t.Fatal(err)
	}
	f.m.sweepOnce(ctx)
	var left []string
	rows, _ := f.m.pool.Query(ctx, "select jti from revoked_access_tokens")
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		left = append(left, s)
	}
	if rows.Err() != nil || len(left) != 1 || left[0] != jti(live.AccessToken) {
		t.Fatalf("after the sweep %v (%v), want only the live token's", left, rows.Err())
	}
}
