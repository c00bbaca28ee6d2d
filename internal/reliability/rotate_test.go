package reliability_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// TestRotateDataKey rotates the data key the documented way: the new key
// becomes FLOWD_DATA_KEY, the old one FLOWD_DATA_KEY_PREVIOUS, the server
// restarts (reading old values, sealing new ones under the new key), and
// `flowd keys rotate-data-key` re-seals everything, resumably (a partial run
// first) and idempotently (a second run changes nothing). Afterwards the old
// key is dropped and every flow, consent link and idempotent replay still works.
func TestRotateDataKey(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Rotation Bank", "ROT")
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)
	type made struct{ id, nationalID, key, body, link string }
	var flowsMade []made
	create := func(base string, i int) {
		m := made{nationalID: fmt.Sprintf("ROT%04d", i), key: fmt.Sprintf("rotation-%d", i)}
		m.body = createBody(m.nationalID, "Rotasen", "")
		a := mustDo(t, "POST", base+"/api/flows", tok, m.body, "Idempotency-Key", m.key)
		if a.Status != 201 {
			t.Fatalf("create: %d %s", a.Status, a.Body)
		}
		var c struct {
			FlowID string `json:"flowId"`
			Links  struct {
				Consent struct{ Href string } `json:"consent"`
			} `json:"_links"`
		}
		a.json(t, &c)
		m.id, m.link = c.FlowID, c.Links.Consent.Href
		flowsMade = append(flowsMade, m)
	}
	for i := range 7 {
		create(p.URL, i)
	}
	// An answer of another POST, kept under the old key too.
	const endpointBody = `{"url":"https://hooks.rotation.example/flowd"}`
	endpoint := mustDo(t, "POST", p.URL+"/api/webhook-endpoints", tok, endpointBody, "Idempotency-Key", "rotation-endpoint")
	if endpoint.Status != 201 {
		t.Fatalf("endpoint: %d %s", endpoint.Status, endpoint.Body)
	}
	p.kill(t)

	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	newKey := base64.StdEncoding.EncodeToString(raw)
	rotating := map[string]string{"FLOWD_DATA_KEY": newKey, "FLOWD_DATA_KEY_PREVIOUS": flowdtest.TestDataKey}
	p = startFlowd(t, dbURL, p.Addr, rotating)
	create(p.URL, 7) // sealed under the new key already
	for _, m := range flowsMade {
		checkFlow(t, p.URL, tok, m.id, m.nationalID)
	}

	// A run that stops after one batch, as an interrupted one would...
	oldSealer, _ := pii.New(mustKey(t, newKey), mustKey(t, flowdtest.TestDataKey))
	// The flows are sealed under their people's keys: the keys are re-sealed.
	partial := rekey.NewResealer(pool, oldSealer)
	if f, err := partial.ResealBatch(context.Background(), 2); err != nil || f != 0 {
		t.Fatalf("partial run: %d flows, %v", f, err)
	}
	// Flow creations' answers are kept with every other POST's.
	answers := idempotency.New(pool, oldSealer, slog.New(slog.DiscardHandler), 0)
	if k, err := answers.ResealBatch(context.Background(), 2); err != nil || k != 2 {
		t.Fatalf("partial run: %d idempotency keys, %v", k, err)
	}
	if n, err := partial.ResealSubjectKeysBatch(context.Background(), 2); err != nil || n != 2 {
		t.Fatalf("partial run: %d subject keys, %v", n, err)
	}
	// ...then the command finishes the job.
	env := map[string]string{}
	for k, v := range p.Env {
		env[k] = v
	}
	out, err := flowdtest.RunCLI(getenvOf(env), "", "keys", "rotate-data-key", "--batch", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		KeyID                                                string
		Flows, SubjectKeys, IdempotencyKeys, ConsentRequests int
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if got.KeyID != oldSealer.KeyID() || got.Flows != 0 || got.SubjectKeys != 5 || got.IdempotencyKeys != 6 || got.ConsentRequests != 7 {
		t.Errorf("rotate-data-key: %+v; want the new key, no flow (each is under its person's key), 5 subject keys "+
			"and 6 idempotency keys (2 of each done before, the endpoint's answer too), 7 consent requests", got)
	}
	if n := count(t, pool, "select count(*) from flows where subject_key_id is null"); n != 0 {
		t.Errorf("%d flows not under a subject key", n)
	}
	for _, table := range []string{"subject_keys", "consent_requests", "api_idempotency_keys"} {
		if n := count(t, pool, "select count(*) from "+table+" where pii_key_id <> $1", got.KeyID); n != 0 {
			t.Errorf("%s: %d rows still under an old key", table, n)
		}
	}
	out, err = flowdtest.RunCLI(getenvOf(env), "", "keys", "rotate-data-key", "--json")
	if err != nil || !strings.Contains(out, `"flows":0,"subjectKeys":0,"idempotencyKeys":0,"consentRequests":0`) {
		t.Errorf("a second run: %s %v; want nothing to do", out, err)
	}

	// The old key is dropped: everything still opens.
	p.kill(t)
	p = startFlowd(t, dbURL, p.Addr, map[string]string{"FLOWD_DATA_KEY": newKey})
	for _, m := range flowsMade {
		checkFlow(t, p.URL, tok, m.id, m.nationalID)
		if a := mustDo(t, "GET", m.link, "", "", "Accept", "text/html"); a.Status != 200 {
			t.Errorf("consent link of %s after the rotation: %d", m.id, a.Status)
		}
	}
	// An idempotent replay of a key stored before the rotation: its request
	// hash was made under the old key, which is no longer configured; the
	// replay of a key made after the rotation works.
	last := flowsMade[len(flowsMade)-1]
	a := mustDo(t, "POST", p.URL+"/api/flows", tok, last.body, "Idempotency-Key", last.key)
	if a.Status != 201 || a.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(a.Body), last.id) {
		t.Errorf("replay after the rotation: %d %s", a.Status, a.Body)
	}
	// With the previous key still listed, replays of older keys match too.
	p.kill(t)
	p = startFlowd(t, dbURL, p.Addr, rotating)
	first := flowsMade[0]
	a = mustDo(t, "POST", p.URL+"/api/flows", tok, first.body, "Idempotency-Key", first.key)
	if a.Status != 201 || a.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(a.Body), first.id) {
		t.Errorf("replay of a key from before the rotation: %d %s", a.Status, a.Body)
	}
	a = mustDo(t, "POST", p.URL+"/api/webhook-endpoints", tok, endpointBody, "Idempotency-Key", "rotation-endpoint")
	if a.Status != 201 || a.Header.Get("Idempotent-Replayed") != "true" || string(a.Body) != string(endpoint.Body) {
		t.Errorf("replay of the endpoint's answer re-sealed: %d %s", a.Status, a.Body)
	}

	// A data key nobody configured cannot open anything: the command says which setting to fix.
	_, _ = rand.Read(raw)
	env["FLOWD_DATA_KEY"] = base64.StdEncoding.EncodeToString(raw)
	env["FLOWD_DATA_KEY_PREVIOUS"] = ""
	if _, err := flowdtest.RunCLI(getenvOf(env), "", "keys", "rotate-data-key"); err == nil || !strings.Contains(err.Error(), "FLOWD_DATA_KEY_PREVIOUS") {
		t.Errorf("rotating without the previous key: %v", err)
	}
}

func mustKey(t *testing.T, b64 string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkFlow(t *testing.T, base, tok, id, nationalID string) {
	t.Helper()
	var got struct {
		Flow struct {
			Data struct{ NationalID string } `json:"data"`
		} `json:"flow"`
	}
	a := mustDo(t, "GET", base+"/api/flows/"+id, tok, "")
	a.json(t, &got)
	if a.Status != 200 || got.Flow.Data.NationalID != nationalID {
		t.Errorf("flow %s: %d %s; want national id %s", id, a.Status, a.Body, nationalID)
	}
}
