package webhooks_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/webhooks"
)

// signatures splits a webhook-signature header into its v1 and v1a parts.
func signatures(header string) (v1, v1a []string) {
	for _, s := range strings.Fields(header) {
		if rest, ok := strings.CutPrefix(s, "v1a,"); ok {
			v1a = append(v1a, rest)
		} else if rest, ok := strings.CutPrefix(s, "v1,"); ok {
			v1 = append(v1, rest)
		}
	}
	return v1, v1a
}

// verifiedBy returns the ids of the keys whose v1a signature d carries.
func verifiedBy(t *testing.T, d delivery, keys []webhooks.PublicKey) []string {
	t.Helper()
	_, v1a := signatures(d.Signature)
	content := []byte(d.ID + "." + d.Timestamp + "." + string(d.Body))
	var ids []string
	for _, sig := range v1a {
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			t.Fatalf("v1a signature %q: %v", sig, err)
		}
		for _, k := range keys {
			pub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(k.Key, "whpk_"))
			if err != nil || len(pub) != ed25519.PublicKeySize {
				t.Fatalf("public key %q is not whpk_ and a base64 ed25519 key", k.Key)
			}
			if ed25519.Verify(pub, content, raw) {
				ids = append(ids, k.ID)
			}
		}
	}
	return ids
}

func TestAsymmetricSigningMoveAndRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	asym, moving, sym := newReceiver(t), newReceiver(t, b.secret), newReceiver(t, b.secret)
	if _, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: asym.URL(), Enabled: true, Signing: webhooks.SigningAsymmetric}); err != nil {
		t.Fatal(err)
	}
	if _, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: sym.URL(), Enabled: true}); err != nil {
		t.Fatal(err)
	}
	m, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: moving.URL(), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err = endpoints.Update(ctx, b.org, m.ID, webhooks.EndpointUpdate{Signing: ptr(webhooks.SigningAsymmetric)}, etag.IfMatch{})
	if err != nil || m.Signing != webhooks.SigningAsymmetric || m.SigningChangedAt == nil {
		t.Fatalf("switching to asymmetric: %+v, %v", m, err)
	}

	ev := b.event(webhooks.FlowCreated, "flow-1", "")
	ev.Sequence = 1
	publish(t, b.pool, b.hooks, ev)
	eventually(t, "a delivery to each endpoint", func() bool {
		return len(asym.Deliveries()) == 1 && len(moving.Deliveries()) == 1 && len(sym.Deliveries()) == 1
	})
	keys, err := b.hooks.PublicKeys(ctx, b.org)
	if err != nil || len(keys) != 1 || keys[0].ExpiresAt != nil {
		t.Fatalf("public keys: %+v, %v", keys, err)
	}
	if v1, _ := signatures(asym.Deliveries()[0].Signature); len(v1) != 0 || !slices.Equal(verifiedBy(t, asym.Deliveries()[0], keys), []string{keys[0].ID}) {
		t.Errorf("the asymmetric endpoint's delivery is signed %q, want one v1a by key %s and no v1", asym.Deliveries()[0].Signature, keys[0].ID)
	}
	// The moving endpoint's receiver verified the v1 signature with the
	// secret (newReceiver); the v1a one verifies with the public key.
	if v1, v1a := signatures(moving.Deliveries()[0].Signature); len(v1) != 1 || len(v1a) != 1 ||
		len(verifiedBy(t, moving.Deliveries()[0], keys)) != 1 || !strings.HasPrefix(moving.Deliveries()[0].Signature, "v1a,") {
		t.Errorf("the moving endpoint's delivery is signed %q, want its v1a and then a v1", moving.Deliveries()[0].Signature)
	}
	if _, v1a := signatures(sym.Deliveries()[0].Signature); len(v1a) != 0 {
		t.Errorf("the symmetric endpoint's delivery is signed %q, want v1 only", sym.Deliveries()[0].Signature)
	}

	// After a rotation both keys sign until the overlap ends, and both are published.
	rotated, err := b.hooks.RotateSigningKey(ctx, b.org)
	if err != nil || len(rotated) != 2 || rotated[1].ID != keys[0].ID || rotated[1].ExpiresAt == nil || rotated[0].ExpiresAt != nil {
		t.Fatalf("rotated keys: %+v, %v; want a new current key and %s expiring", rotated, err, keys[0].ID)
	}
	ev2 := b.event(webhooks.FlowOpened, "flow-1", "")
	ev2.Sequence = 2
	publish(t, b.pool, b.hooks, ev2)
	eventually(t, "the second delivery", func() bool { return len(asym.Deliveries()) == 2 })
	if got := verifiedBy(t, asym.Deliveries()[1], rotated); !slices.Equal(got, []string{rotated[0].ID, rotated[1].ID}) {
		t.Errorf("after the rotation the delivery is signed %q by keys %v, want %s then %s",
			asym.Deliveries()[1].Signature, got, rotated[0].ID, rotated[1].ID)
	}
	if published, err := b.hooks.PublicKeys(ctx, b.org); err != nil || len(published) != 2 {
		t.Errorf("published keys after the rotation: %+v, %v", published, err)
	}
}

func TestThinPayloadCarriesIdsAndLinksOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	thin := newReceiver(t, b.secret)
	if _, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: thin.URL(), Enabled: true, Payload: webhooks.PayloadThin}); err != nil {
		t.Fatal(err)
	}
	ev := b.event(webhooks.FlowAccepted, "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21", "")
	publish(t, b.pool, b.hooks, ev)
	eventually(t, "the thin delivery", func() bool { return len(thin.Deliveries()) == 1 })
	d := thin.Deliveries()[0]
	var body map[string]any
	if err := json.Unmarshal(d.Body, &body); err != nil {
		t.Fatal(err)
	}
	data, _ := body["data"].(map[string]any)
	want := map[string]any{
		"eventId": d.ID, "organizationId": b.org, "flowId": ev.FlowID, "referenceId": ev.ReferenceID, "sequence": 3.0,
		"links": map[string]any{"event": "/api/events/" + d.ID, "flow": "/api/flows/" + ev.FlowID},
	}
	if len(body) != 3 || body["type"] != "flow.accepted" || body["timestamp"] == nil || !jsonEqual(data, want) {
		t.Errorf("thin body %s, want type, timestamp and data %v", d.Body, want)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestTestEventGoesToItsEndpointOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	tried, other := newReceiver(t, b.secret), newReceiver(t, b.secret)
	e, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: tried.URL(), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	o, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: other.URL(), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.hooks.SendTestEvent(ctx, b.org, e.ID, "flow.nonsense"); !slices.Equal(fieldsOf(err), []string{"eventType"}) {
		t.Errorf("a test event of an unknown type: %v, want an error naming eventType", err)
	}
	sent, err := b.hooks.SendTestEvent(ctx, b.org, e.ID, "")
	if err != nil || sent.Type != webhooks.FlowCreated {
		t.Fatalf("SendTestEvent: %+v, %v", sent, err)
	}
	eventually(t, "the test delivery", func() bool { return len(tried.Deliveries()) == 1 })
	if d := tried.Deliveries()[0]; d.ID != sent.EventID || d.Payload.Type != "flow.created" || d.Payload.Data["referenceId"] != "TEST-EVENT" {
		t.Errorf("the test delivery: %+v", d)
	}
	rec, deliveries, err := b.hooks.Event(ctx, b.org, sent.EventID)
	if err != nil || !rec.Test || len(deliveries) != 1 {
		t.Errorf("the test event: %+v with %d deliveries, %v; want a test with one delivery", rec, len(deliveries), err)
	}
	if _, err := b.hooks.Redeliver(ctx, b.org, sent.EventID, o.ID); !errors.Is(err, webhooks.ErrNothingToRedeliver) {
		t.Errorf("redelivering a test event to another endpoint: %v, want ErrNothingToRedeliver", err)
	}
	if _, err := b.hooks.Recover(ctx, b.org, o.ID, rec.CreatedAt.Add(-1), "staff:test"); err != nil {
		t.Fatal(err)
	}
	// The recovery finds nothing to send: a test event is not missed.
	eventually(t, "the recovery to finish", func() bool {
		rs, err := b.hooks.Recoveries(ctx, b.org, o.ID)
		return err == nil && len(rs) == 1 && rs[0].State == "done"
	})
	if n := other.Arrived(); n != 0 {
		t.Errorf("another endpoint got %d deliveries of the test event", n)
	}

	// A test delivery that fails shows as a test among the deliveries not delivered.
	failing := newReceiver(t, b.secret)
	failing.respond = func(delivery, int) int { return http.StatusServiceUnavailable }
	f, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: failing.URL(), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := b.hooks.SendTestEvent(ctx, b.org, f.ID, webhooks.FlowRejected)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the failing test delivery in the backlog", func() bool {
		bl, err := b.hooks.Backlog(ctx, b.org)
		return err == nil && len(bl.Deliveries) > 0 && bl.Deliveries[0].EventID == failed.EventID && bl.Deliveries[0].Test
	})
}
