package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

const consentRevoked = "urn:flowd:event:consent-revoked"

// setReceiver is a data holder's push endpoint (RFC 8935) written apart
// from flowd's code: it checks each SET's signature with the keys flowd
// published, using another JOSE library than flowd's, and counts each jti's
// arrivals. Armed, it keeps the next push waiting for its answer until
// released, so that a kill finds a push in flight.
type setReceiver struct {
	t    *testing.T
	keys jwk.Set
	srv  *httptest.Server

	mu      sync.Mutex
	arrived map[string]int    // jti → pushes that verified
	consent map[string]string // jti → the consent it names
	armed   bool
	held    chan struct{} // closed by release; nil until a push is held
	heldJTI string
}

func newSETReceiver(t *testing.T, jwksURI string) *setReceiver {
	keys, err := jwk.Fetch(context.Background(), jwksURI)
	if err != nil {
		t.Fatalf("the JWKS: %v", err)
	}
	r := &setReceiver{t: t, keys: keys, arrived: map[string]int{}, consent: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	t.Cleanup(r.release) // before the server's Close, which waits for its handlers
	return r
}

func (r *setReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	payload, err := jws.Verify(body, jws.WithKeySet(r.keys, jws.WithInferAlgorithmFromKey(true)))
	var set struct {
		JTI   string `json:"jti"`
		SubID struct {
			Consent struct{ ID string } `json:"consent"`
		} `json:"sub_id"`
		Events map[string]struct {
			Reason    string `json:"reason"`
			Initiator string `json:"initiator"`
		} `json:"events"`
	}
	if err == nil {
		err = json.Unmarshal(payload, &set)
	}
	if err != nil || set.JTI == "" {
		r.t.Errorf("a push that is not a SET signed with the published keys (%v): %.200s", err, body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if ev, ok := set.Events[consentRevoked]; ok && (ev.Reason != "withdrawn" || ev.Initiator != "organization") {
		r.t.Errorf("SET %s: %+v, want withdrawn by the organization", set.JTI, ev)
	}
	r.mu.Lock()
	r.arrived[set.JTI]++
	r.consent[set.JTI] = set.SubID.Consent.ID
	var held chan struct{}
	if r.armed {
		r.armed, r.held, r.heldJTI = false, make(chan struct{}), set.JTI
		held = r.held
	}
	r.mu.Unlock()
	if held != nil {
		<-held
	}
	w.WriteHeader(http.StatusAccepted)
}

// arm makes the receiver hold the next push it gets.
func (r *setReceiver) arm() {
	r.mu.Lock()
	r.armed = true
	r.mu.Unlock()
}

// holding reports whether a push is being held.
func (r *setReceiver) holding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held != nil
}

// release answers the held push, if any.
func (r *setReceiver) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held != nil {
		select {
		case <-r.held:
		default:
			close(r.held)
		}
	}
}

// byConsent returns, for each consent, the distinct jtis that named it.
func (r *setReceiver) byConsent() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for jti, consent := range r.consent {
		out[consent] = append(out[consent], jti)
	}
	return out
}

// TestKillNineDuringWithdrawalsLosesNoSET kills flowd (SIGKILL) twice
// while an organization withdraws 50 accepted consents through the API,
// each naming a data holder's resource whose push stream goes to a
// receiver of the test's own: once mid-burst, and once while the push of
// one more withdrawal, made alone after the burst, is in flight. Afterwards every acknowledged withdrawal's SET
// reached the receiver, every SET flowd stored arrived, and a consent's
// SETs are one jti, however often it came.
func TestKillNineDuringWithdrawalsLosesNoSET(t *testing.T) {
	t.Parallel()
	n := 50
	if long() {
		n = 300
	}
	dbURL := dbtest.NewURL(t)
	extra := map[string]string{"FLOWD_ALLOW_INSECURE_URLS": "true", "FLOWD_CONSENT_AUTH": "none"}
	p := startFlowd(t, dbURL, "", extra)
	holder := newTenant(t, p.Env, "Tax Office", "TAX")
	bank := newTenant(t, p.Env, "Burst Bank", "BURST")
	holderTok, bankTok := holder.token(t, p.URL), bank.token(t, p.URL)
	pool := openPool(t, dbURL)

	const resource = "https://api.tax.example/income"
	if a := mustDo(t, "POST", p.URL+"/api/resources", holderTok, `{"uri":"`+resource+`","name":"Income"}`); a.Status != 201 {
		t.Fatalf("resource: %d %s", a.Status, a.Body)
	}
	if a := mustDo(t, "POST", p.URL+"/api/flow-definitions", bankTok, `{"id":"loan","title":{"en":"Share your income","nb":"Del inntekten din"},
		"purpose":{"en":"We check it.","nb":"Vi sjekker den."},"dataCategories":[{"en":"Income","nb":"Inntekt"}],"assuranceLevel":"low",
		"resources":["`+resource+`"]}`); a.Status != 201 {
		t.Fatalf("definition: %d %s", a.Status, a.Body)
	}
	rcv := newSETReceiver(t, p.URL+"/oauth/jwks")
	var stream struct {
		StreamID string `json:"stream_id"`
	}
	a := mustDo(t, "POST", p.URL+"/ssf/streams", holderTok, `{"delivery":{"method":"urn:ietf:rfc:8935","endpoint_url":"`+rcv.srv.URL+`/ssf"},
		"events_requested":["`+consentRevoked+`"]}`)
	if a.Status != 201 {
		t.Fatalf("stream: %d %s", a.Status, a.Body)
	}
	a.json(t, &stream)

	ids := make([]string, n)
	for i := range ids {
		body, _ := json.Marshal(map[string]string{"nationalId": fmt.Sprintf("SSF%05d", i), "lastName": "Burst",
			"redirectUrl": "https://bank.example/done", "flowDefinitionId": "loan"})
		var c struct {
			FlowID string `json:"flowId"`
			Links  struct {
				Consent struct{ Href string } `json:"consent"`
			} `json:"_links"`
		}
		a := mustDo(t, "POST", p.URL+"/api/flows", bankTok, string(body))
		if a.Status != 201 {
			t.Fatalf("create: %d %s", a.Status, a.Body)
		}
		a.json(t, &c)
		accept(t, c.Links.Consent.Href)
		ids[i] = c.FlowID
	}

	// The burst: four clients withdraw, each trying a withdrawal again
	// until flowd answers it (200) or says it is done already (409: an
	// earlier try committed and its answer was lost to a kill).
	base := p.URL // every restart listens on the same address
	var (
		mu     sync.Mutex
		status = map[string]int{}
		queue  = make(chan string, n)
		wg     sync.WaitGroup
	)
	burst, last := ids[:n-1], ids[n-1]
	for _, id := range burst {
		queue <- id
	}
	close(queue)
	withdraw := func(id string) {
		for {
			a, err := do("POST", base+"/api/flows/"+id+"/withdraw", bankTok, `{"reason":"The loan was declined."}`)
			if err == nil && (a.Status == 200 || a.Status == 409) {
				mu.Lock()
				status[id] = a.Status
				mu.Unlock()
				return
			}
			if err == nil && a.Status != 503 {
				t.Errorf("withdraw %s: %d %s", id, a.Status, a.Body)
				return
			}
			time.Sleep(20 * time.Millisecond) // flowd is down or starting; do not spin
		}
	}
	for range 4 {
		wg.Go(func() {
			for id := range queue {
				withdraw(id)
			}
		})
	}
	eventually(t, fmt.Sprintf("%d withdrawals answered", n/2), func() bool { mu.Lock(); defer mu.Unlock(); return len(status) >= n/2 })
	p.kill(t)
	p = startFlowd(t, dbURL, p.Addr, extra)
	wg.Wait()

	// Once the burst is delivered, one more withdrawal comes alone, and
	// flowd is killed while its push is in flight: no later SET starts
	// the stream's delivery again.
	eventually(t, "the burst's SETs at the receiver", func() bool { return len(rcv.byConsent()) >= n-1 })
	rcv.arm()
	withdraw(last)
	eventually(t, "the last push held in flight", rcv.holding)
	p.kill(t)
	rcv.release()
	p = startFlowd(t, dbURL, p.Addr, extra)

	// The held push's answer never reached flowd: it is pushed again.
	eventually(t, "the SET held at the kill pushed again", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.arrived[rcv.heldJTI] >= 2
	})
	got := rcv.byConsent()
	acked, again := 0, 0
	for _, id := range ids {
		var v consentView
		mustDo(t, "GET", p.URL+"/api/flows/"+id, bankTok, "").json(t, &v)
		if v.Flow.Consent.Status != "Withdrawn" {
			t.Errorf("flow %s answered %d is %s", id, status[id], v.Flow.Consent.Status)
		}
		if status[id] == 200 {
			acked++
		}
		if jtis := got[id]; len(jtis) != 1 {
			t.Errorf("flow %s (answered %d): SETs %v, want one jti", id, status[id], jtis)
		}
	}
	// Every SET flowd stored for the stream arrived, and is acknowledged.
	eventually(t, "every SET acknowledged", func() bool {
		return count(t, pool, `select count(*) from ssf_sets where stream_id = $1 and state <> 'acknowledged'`, stream.StreamID) == 0
	})
	rows, err := pool.Query(context.Background(), `select jti::text, state from ssf_sets where stream_id = $1`, stream.StreamID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := 0
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for rows.Next() {
		var jti, state string
		if err := rows.Scan(&jti, &state); err != nil {
			t.Fatal(err)
		}
		stored++
		if rcv.arrived[jti] == 0 || state != "acknowledged" {
			t.Errorf("SET %s is %s and arrived %d times", jti, state, rcv.arrived[jti])
		}
	}
	var repeated []string
	for jti, k := range rcv.arrived {
		again += k - 1
		if k > 1 {
			repeated = append(repeated, jti)
		}
	}
	sort.Strings(repeated)
	if stored != n {
		t.Errorf("flowd stored %d SETs for %d withdrawals", stored, n)
	}
	t.Logf("%d withdrawals (%d answered 200), 2 kills, %d SETs stored, %d re-deliveries of the same jti %v", n, acked, stored, again, repeated)
}
