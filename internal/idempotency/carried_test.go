package idempotency_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// createCarried stands for flow creation's idempotency.Carried: its
// request is the text the older store hashed.
type createCarried struct{ request string }

func (c createCarried) Fingerprint(idempotency.Request) (string, bool) {
	return c.request, c.request != ""
}

func (createCarried) Body(flowID, referenceID, consentURL string) ([]byte, error) {
	return []byte(flowID + " " + referenceID + " " + consentURL), nil
}

const carriedFlow = "019ab3c6-2222-7f80-9a1b-2c3d4e5f6a7d"

// insertCarried writes the row the migration one_idempotency_store makes of
// a create's key: the older store's hash of request and its sealed link.
func insertCarried(t *testing.T, pool *pgxpool.Pool, sealer *pii.Sealer, key, request string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `insert into api_idempotency_keys (organization_id, key, request_hash, method, path,
		status, header, pii_key_id, body_sealed, expires_at, carried)
		values ('org-a', $1, $2, 'POST', '/api/flows', 201, $3, $4, $5, now() + interval '1 hour', $6)`,
		key, sealer.Hash("idempotency", request), `{"Content-Type":["application/json"],"Location":["/api/flows/`+carriedFlow+`"]}`,
		sealer.KeyID(), sealer.Seal("https://flowd.example/consent/tok", "idempotency:"+carriedFlow),
		`{"flowId":"`+carriedFlow+`","referenceId":"FLOW-7"}`); err != nil {
		t.Fatal(err)
	}
}

// TestACarriedAnswerReplaysForItsCreateOnly: a create's key carried over
// from the flows module's table replays, through the create's Carried, the
// answer made of its link; another request, or an operation without a
// Carried, is a mismatch naming the create; a rotated data key re-seals it;
// once expired it gives way to a new request like any other row.
func TestACarriedAnswerReplaysForItsCreateOnly(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	oldKey := newKey(t)
	sealer := newSealer(t, oldKey)
	insertCarried(t, pool, sealer, "k-create", `"client-a","false","ID-1"`)
	keys := idempotency.New(pool, sealer, discard(), 0)
	ctx := t.Context()
	create := idempotency.Request{OrganizationID: "org-a", ClientID: "client-a", Key: "k-create", Method: "POST",
		Path: "/api/flows", Body: []byte(`{}`), Carried: createCarried{`"client-a","false","ID-1"`}}
	want := carriedFlow + " FLOW-7 https://flowd.example/consent/tok"
	replay := func(what string, keys *idempotency.Keys) {
		t.Helper()
		a, err := keys.Lookup(ctx, create)
		if err != nil || a.Status != 201 || string(a.Body) != want || a.Header.Get("Location") != "/api/flows/"+carriedFlow ||
			a.Header.Get("Content-Type") != "application/json" || a.FlowID != "" {
			t.Fatalf("%s: %+v %v, want 201 %q", what, a, err, want)
		}
	}
	replay("replay", keys)

	other, cancel := create, cancelRequest
	other.Carried = createCarried{`"client-a","false","ID-2"`}
	cancel.Key = "k-create"
	for name, r := range map[string]idempotency.Request{"another create": other, "another operation": cancel} {
		var m *idempotency.MismatchError
		if _, err := keys.Lookup(ctx, r); !errors.As(err, &m) || m.Method != "POST" || m.Path != "/api/flows" {
			t.Errorf("%s: %v, want a mismatch naming POST /api/flows", name, err)
		}
	}

	// A rotation re-seals the link, bound to its flow as before; the hash
	// matches while the old key is configured.
	rotated := idempotency.New(pool, newSealer(t, newKey(t), oldKey), discard(), 0)
	if n, err := rotated.ResealBatch(ctx, 10); err != nil || n != 1 {
		t.Fatalf("reseal: %d %v", n, err)
	}
	if n, err := rotated.ResealBatch(ctx, 10); err != nil || n != 0 {
		t.Fatalf("a second reseal: %d %v", n, err)
	}
	replay("replay after the rotation", rotated)

	// Expired, it is an ordinary free key: kept anew, it is no longer carried.
	if _, err := pool.Exec(ctx, `update api_idempotency_keys set expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	fresh := create
	fresh.Carried = nil
	if err := keepIn(t, pool, rotated, fresh, idempotency.Answer{Status: 201, Header: http.Header{}, Body: []byte(`{"new":1}`)}); err != nil {
		t.Fatal(err)
	}
	if a, err := rotated.Lookup(ctx, fresh); err != nil || string(a.Body) != `{"new":1}` {
		t.Fatalf("the key kept anew: %+v %v", a, err)
	}
	if n := count(t, pool, `select count(*) from api_idempotency_keys where carried is not null`); n != 0 {
		t.Fatalf("%d rows still carried", n)
	}
}
