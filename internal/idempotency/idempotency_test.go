package idempotency_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func newSealer(t *testing.T, keys ...[]byte) *pii.Sealer {
	t.Helper()
	s, err := pii.New(keys[0], keys[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// keepIn keeps a in a transaction of its own, as a module's write would.
func keepIn(t *testing.T, pool *pgxpool.Pool, keys *idempotency.Keys, r idempotency.Request, a idempotency.Answer) error {
	t.Helper()
	return database.WithTx(t.Context(), pool, func(tx pgx.Tx) error { return keys.KeepTx(t.Context(), tx, r, a) })
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

var cancelRequest = idempotency.Request{OrganizationID: "org-a", ClientID: "client-a", Key: "k-1", Method: "POST",
	Path: "/api/flows/019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d/cancel", Body: []byte(`{}`)}

var cancelAnswer = idempotency.Answer{Status: 200, Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"3"`}},
	Body: []byte(`{"flow":{"data":{"nationalId":"SECRET-12345"}}}` + "\n"), FlowID: "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d"}

// TestAKeptAnswerReplaysOnlyForItsRequest: the answer comes back for the
// same request; another request, another client, or another path is a
// mismatch naming the first request; another organization's key is its own.
func TestAKeptAnswerReplaysOnlyForItsRequest(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	keys := idempotency.New(pool, newSealer(t, newKey(t)), discard(), 0)
	ctx := t.Context()
	if _, err := keys.Lookup(ctx, cancelRequest); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("before: %v", err)
	}
	if err := keepIn(t, pool, keys, cancelRequest, cancelAnswer); err != nil {
		t.Fatal(err)
	}
	a, err := keys.Lookup(ctx, cancelRequest)
	if err != nil || a.Status != 200 || !bytes.Equal(a.Body, cancelAnswer.Body) || a.Header.Get("ETag") != `"3"` ||
		a.Header.Get("Content-Type") != "application/json" || a.FlowID != cancelAnswer.FlowID {
		t.Fatalf("replay: %+v %v", a, err)
	}
	otherBody, otherClient, otherPath := cancelRequest, cancelRequest, cancelRequest
	otherBody.Body = []byte(`{"reason":"x"}`)
	otherClient.ClientID = "client-a2"
	otherPath.Path = "/api/flows/019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d/withdraw"
	for name, r := range map[string]idempotency.Request{"another body": otherBody, "another client": otherClient, "another path": otherPath} {
		var m *idempotency.MismatchError
		if _, err := keys.Lookup(ctx, r); !errors.As(err, &m) || m.Method != "POST" || m.Path != cancelRequest.Path {
			t.Errorf("%s: %v, want a mismatch naming %s", name, err, cancelRequest.Path)
		}
		if err := keepIn(t, pool, keys, r, cancelAnswer); !errors.Is(err, idempotency.ErrTaken) {
			t.Errorf("%s kept: %v, want ErrTaken", name, err)
		}
	}
	orgB := cancelRequest
	orgB.OrganizationID = "org-b"
	if _, err := keys.Lookup(ctx, orgB); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("another organization: %v", err)
	}
	// Nothing personal is stored readable.
	var row string
	if err := pool.QueryRow(ctx, `select k::text from api_idempotency_keys k`).Scan(&row); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(row, "SECRET-12345") || strings.Contains(row, "5345435245") {
		t.Fatalf("the answer is stored readable: %s", row)
	}
}

// TestKeysExpireAndArePurged: after 24 hours a key answers nothing, may be
// kept again for another request, and is purged once expired.
func TestKeysExpireAndArePurged(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	keys := idempotency.New(pool, newSealer(t, newKey(t)), discard(), 0)
	ctx := t.Context()
	if err := keepIn(t, pool, keys, cancelRequest, cancelAnswer); err != nil {
		t.Fatal(err)
	}
	other := cancelRequest
	other.Key = "k-2"
	if err := keys.Keep(ctx, other, idempotency.Answer{Status: 200, Body: []byte(`{"matches":true}`)}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `select count(*) from api_idempotency_keys
		where expires_at between now() + interval '23 hours 59 minutes' and now() + interval '24 hours'`); n != 2 {
		t.Fatalf("%d keys expire in 24 hours, want 2", n)
	}
	if _, err := pool.Exec(ctx, `update api_idempotency_keys set expires_at = now() - interval '1 second' where key = 'k-1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Lookup(ctx, cancelRequest); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("an expired key: %v", err)
	}
	n, err := keys.Purge(ctx)
	if err != nil || n != 1 || count(t, pool, `select count(*) from api_idempotency_keys`) != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	// An expired row not yet purged gives way to a new request.
	if _, err := pool.Exec(ctx, `update api_idempotency_keys set expires_at = now() - interval '1 second' where key = 'k-2'`); err != nil {
		t.Fatal(err)
	}
	renewed := other
	renewed.Body = []byte(`{"another":"request"}`)
	if err := keepIn(t, pool, keys, renewed, cancelAnswer); err != nil {
		t.Fatalf("keeping an expired key again: %v", err)
	}
	if a, err := keys.Lookup(ctx, renewed); err != nil || !bytes.Equal(a.Body, cancelAnswer.Body) {
		t.Fatalf("the renewed key: %+v %v", a, err)
	}
}

// TestForgettingAFlowDeletesItsAnswers: a deleted flow's answers go with it;
// others stay.
func TestForgettingAFlowDeletesItsAnswers(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	keys := idempotency.New(pool, newSealer(t, newKey(t)), discard(), 0)
	if err := keepIn(t, pool, keys, cancelRequest, cancelAnswer); err != nil {
		t.Fatal(err)
	}
	other := cancelRequest
	other.Key = "k-other"
	if err := keepIn(t, pool, keys, other, idempotency.Answer{Status: 201, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := database.WithTx(t.Context(), pool, func(tx pgx.Tx) error {
		return keys.ForgetFlowTx(t.Context(), tx, "org-a", cancelAnswer.FlowID)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Lookup(t.Context(), cancelRequest); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the flow's answer: %v", err)
	}
	if _, err := keys.Lookup(t.Context(), other); err != nil {
		t.Fatalf("another answer: %v", err)
	}
}

// TestAnswersAreResealedAndStillMatchAfterARotation: after a data-key
// rotation an answer kept before it still replays, and ResealBatch seals it
// under the new key, once.
func TestAnswersAreResealedAndStillMatchAfterARotation(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	oldKey, newDataKey := newKey(t), newKey(t)
	before := idempotency.New(pool, newSealer(t, oldKey), discard(), 0)
	if err := keepIn(t, pool, before, cancelRequest, cancelAnswer); err != nil {
		t.Fatal(err)
	}
	rotated := newSealer(t, newDataKey, oldKey)
	after := idempotency.New(pool, rotated, discard(), 0)
	if a, err := after.Lookup(t.Context(), cancelRequest); err != nil || !bytes.Equal(a.Body, cancelAnswer.Body) {
		t.Fatalf("replay after the rotation: %+v %v", a, err)
	}
	for i, want := range []int{1, 0} {
		if n, err := after.ResealBatch(t.Context(), 10); err != nil || n != want {
			t.Fatalf("reseal %d: %d %v, want %d", i, n, err, want)
		}
	}
	if n := count(t, pool, `select count(*) from api_idempotency_keys where pii_key_id = $1`, rotated.KeyID()); n != 1 {
		t.Fatalf("%d answers under the new key", n)
	}
	if a, err := after.Lookup(t.Context(), cancelRequest); err != nil || !bytes.Equal(a.Body, cancelAnswer.Body) {
		t.Fatalf("replay after the reseal: %+v %v", a, err)
	}
}
