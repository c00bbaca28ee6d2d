package ssf_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/ssf"
)

const (
	holderOrg = "org-holder" // the data holder, whose streams they are
	bankOrg   = "org-bank"   // the organization the consents were given to
)

// keySigner signs SETs with one EC key, as identity's receipt key does.
type keySigner struct{ key *ecdsa.PrivateKey }

func (s keySigner) SignReceiptTx(_ context.Context, _ database.Tx, typ string, claims []byte) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: s.key},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)).WithHeader("kid", "receipt-1"))
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// everyHolder says every consent concerns the data holder.
type everyHolder struct{}

func (everyHolder) DataHoldersTx(context.Context, database.Tx, string, string, int) ([]string, error) {
	return []string{holderOrg}, nil
}

// dataKey is the test data key; rotatedKey one that replaces it.
var (
	dataKey    = []byte("0123456789abcdef0123456789abcdef")
	rotatedKey = []byte("fedcba9876543210fedcba9876543210")
)

func testSealer(t *testing.T, key []byte, previous ...[]byte) *pii.Sealer {
	t.Helper()
	s, err := pii.New(key, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bundle is what setup gives a test.
type bundle struct {
	pool   *pgxpool.Pool
	m      *ssf.Module
	signer keySigner
	keys   jwk.Set // the public keys a receiver checks SETs with
	opts   ssf.Options
}

// fastSchedule retries at once, so that tests of retries stay fast.
var fastSchedule = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond,
	10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}

// setup returns a module on a fresh database with a short retry schedule;
// mutate changes its options. start runs its push workers.
func setup(t *testing.T, mutate ...func(*ssf.Options)) *bundle {
	t.Helper()
	pool := dbtest.New(t)
	key := testkeys.EC(t)
	keys, err := jwk.Parse(testkeys.PublicJWKS(t, "receipt-1", key))
	if err != nil {
		t.Fatal(err)
	}
	opts := ssf.Options{Issuer: "https://flowd.example", AllowInsecure: true, AllowPrivate: true, Timeout: 5 * time.Second,
		Schedule: fastSchedule, PollEvery: 20 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond}
	for _, f := range mutate {
		f(&opts)
	}
	return &bundle{pool: pool, m: newModule(t, pool, keySigner{key}, opts), signer: keySigner{key}, keys: keys, opts: opts}
}

func newModule(t *testing.T, pool *pgxpool.Pool, signer ssf.Signer, opts ssf.Options) *ssf.Module {
	t.Helper()
	m, err := ssf.New(pool, signer, everyHolder{}, testSealer(t, dataKey), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// start runs m's push workers until the test ends.
func start(t *testing.T, m *ssf.Module) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Until(testwait.Deadline(t))):
			t.Error("Run did not return after the end of its context")
		}
	})
}

// pushStream creates an enabled push stream to url.
func (b *bundle) pushStream(t *testing.T, url string) ssf.Stream {
	t.Helper()
	s, err := b.m.CreateStream(context.Background(), ssf.Owner{OrganizationID: holderOrg, ClientID: "holder-client"}, ssf.StreamConfig{
		Delivery:        &ssf.Delivery{Method: ssf.DeliveryPush, EndpointURL: url, AuthorizationHeader: "Bearer receiver-secret"},
		EventsRequested: &[]string{ssf.EventConsentRevoked}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pollStream creates an enabled poll stream.
func (b *bundle) pollStream(t *testing.T) ssf.Stream {
	t.Helper()
	s, err := b.m.CreateStream(context.Background(), ssf.Owner{OrganizationID: holderOrg, ClientID: "holder-client"}, ssf.StreamConfig{
		Delivery: &ssf.Delivery{Method: ssf.DeliveryPoll}, EventsRequested: &[]string{ssf.EventConsentRevoked}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// revoke withdraws consents in one transaction each; txn names each
// change "<consent>.<n>" so a receiver can tell them apart.
func (b *bundle) revoke(t *testing.T, consent string, n int) {
	t.Helper()
	if err := b.tryRevoke(consent, n); err != nil {
		t.Fatal(err)
	}
}

// tryRevoke is revoke for a goroutine of the test's.
func (b *bundle) tryRevoke(consent string, n int) error {
	return database.WithTx(context.Background(), b.pool, func(tx database.Tx) error {
		return b.m.RevokedTx(context.Background(), tx, ssf.Revocation{OrganizationID: bankOrg, ConsentID: consent,
			DefinitionID: "def-1", DefinitionVersion: 1, Reason: ssf.ReasonWithdrawn, Initiator: ssf.InitiatorIndividual,
			At: time.Now(), Txn: fmt.Sprintf("%s.%d", consent, n)})
	})
}

// orderBroken says where got, the txns a receiver accepted, breaks the
// order flowd keeps of want, the order made: each consent's SETs in it, and
// a stream's own events in it with all others. "" when got keeps it and
// holds each of want once.
func orderBroken(got, want []string) string {
	pos := make(map[string]int, len(got))
	for i, g := range got {
		if _, twice := pos[g]; twice {
			return fmt.Sprintf("%s accepted twice in %v", g, got)
		}
		pos[g] = i
	}
	if len(got) != len(want) {
		return fmt.Sprintf("accepted %d SETs %v, want %d", len(got), got, len(want))
	}
	for i, x := range want {
		if _, ok := pos[x]; !ok {
			return fmt.Sprintf("%s not accepted in %v", x, got)
		}
		for _, y := range want[i+1:] {
			cx, cy := consentOfTxn(x), consentOfTxn(y)
			if (cx == cy || cx == "" || cy == "") && pos[x] > pos[y] {
				return fmt.Sprintf("%s came after %s in %v", x, y, got)
			}
		}
	}
	return ""
}

// consentOfTxn is the consent of a txn revoke made; "" for a stream's own event.
func consentOfTxn(txn string) string {
	if !strings.HasPrefix(txn, "consent-") {
		return ""
	}
	return txn[:strings.LastIndex(txn, ".")]
}

// stream reads a stream back.
func (b *bundle) stream(t *testing.T, id string) ssf.Stream {
	t.Helper()
	s, err := b.m.Stream(context.Background(), holderOrg, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// push is one SET as a receiver got it.
type push struct {
	at     time.Time
	jti    string
	txn    string
	event  string
	claims map[string]any
	// status and errBody are what the receiver answered.
	status  int
	errBody string
}

// receiver is an RFC 8935 push receiver written apart from flowd's code:
// it checks each SET's typ and signature with lestrrat-go/jwx (flowd signs
// with go-jose) and answers what answer says (202 when nil).
type receiver struct {
	t      *testing.T
	keys   jwk.Set
	srv    *httptest.Server
	mu     sync.Mutex
	got    []push // every push, answered or not
	answer func(p push, n int) (int, string)
	hold   chan struct{} // when set, a push waits for it to close

	releaseOnce sync.Once
}

func newReceiver(t *testing.T, keys jwk.Set) *receiver {
	r := &receiver{t: t, keys: keys}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.release()
		r.srv.Close()
	})
	return r
}

// holdPushes makes every push wait until release.
func (r *receiver) holdPushes() {
	r.mu.Lock()
	r.hold = make(chan struct{})
	r.mu.Unlock()
}

// release lets held pushes be answered.
func (r *receiver) release() {
	r.releaseOnce.Do(func() {
		r.mu.Lock()
		if r.hold != nil {
			close(r.hold)
		}
		r.mu.Unlock()
	})
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if ct := req.Header.Get("Content-Type"); ct != "application/secevent+jwt" {
		r.t.Errorf("a push's Content-Type is %q, want application/secevent+jwt", ct)
	}
	if a := req.Header.Get("Authorization"); a != "Bearer receiver-secret" {
		r.t.Errorf("a push's Authorization is %q, want the stream's", a)
	}
	p, err := r.verify(body)
	if err != nil {
		r.t.Errorf("a pushed SET: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	p.status, p.errBody = http.StatusAccepted, ""
	if r.answer != nil {
		p.status, p.errBody = r.answer(p, len(r.got)+1)
	}
	r.got = append(r.got, p)
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	status, errBody := p.status, p.errBody
	if errBody != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, errBody)
}

func (r *receiver) verify(token []byte) (push, error) {
	msg, err := jws.Parse(token)
	if err != nil {
		return push{}, err
	}
	if typ := msg.Signatures()[0].ProtectedHeaders().Type(); typ != "secevent+jwt" {
		return push{}, fmt.Errorf("typ %q, want secevent+jwt", typ)
	}
	payload, err := jws.Verify(token, jws.WithKeySet(r.keys, jws.WithInferAlgorithmFromKey(true)))
	if err != nil {
		return push{}, fmt.Errorf("the signature does not verify: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return push{}, err
	}
	p := push{at: time.Now(), claims: claims}
	p.jti, _ = claims["jti"].(string)
	p.txn, _ = claims["txn"].(string)
	events, _ := claims["events"].(map[string]any)
	for typ := range events {
		p.event = typ
	}
	return p, nil
}

func (r *receiver) url() string { return r.srv.URL + "/ssf" }

// setAnswer changes what the receiver answers from now on.
func (r *receiver) setAnswer(f func(p push, n int) (int, string)) {
	r.mu.Lock()
	r.answer = f
	r.mu.Unlock()
}

// pushes returns what the receiver got so far.
func (r *receiver) pushes() []push {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]push(nil), r.got...)
}

// accepted returns the pushes the receiver answered 2xx to, in order.
func (r *receiver) accepted() []push {
	var out []push
	for _, p := range r.pushes() {
		if p.status/100 == 2 {
			out = append(out, p)
		}
	}
	return out
}

// awaitCount waits until the receiver has got at least n pushes.
func (r *receiver) awaitCount(t *testing.T, n int) []push {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d pushes", n), func() (bool, string) {
		got := r.pushes()
		return len(got) >= n, fmt.Sprintf("%d pushes: %v", len(got), txns(got))
	})
	return r.pushes()
}

func txns(ps []push) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.txn
		if p.txn == "" {
			out[i] = p.event
		}
	}
	return out
}

// setState returns the state, err and err_description of a SET.
func (b *bundle) setState(t *testing.T, jti string) (state, errCode, description string) {
	t.Helper()
	err := b.pool.QueryRow(context.Background(), `select state, err, err_description from ssf_sets where jti = $1`, jti).
		Scan(&state, &errCode, &description)
	if err != nil {
		t.Fatalf("SET %s: %v", jti, err)
	}
	return state, errCode, description
}
