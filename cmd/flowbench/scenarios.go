package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
	"github.com/flowd/flowd/cmd/flowbench/internal/pgbench"
	"github.com/jackc/pgx/v5"
)

// scenario drives flowd for the run's duration and measures the database's
// limit for the same statements with pgbench.
type scenario func(ctx context.Context, b *bench) (Result, error)

// allScenarios is the default order: creates first, so that later scenarios
// read a database that has been written to.
var allScenarios = []string{"token", "consent-token", "create", "retrieve", "retrieve-dpop", "list-first", "list-deep", "mixed", "person-page", "webhook",
	"webhook-isolation", "webhook-ordered", "webhook-throttle", "webhook-backlog", "ssf"}

var scenarioByName = map[string]scenario{
	"token": tokenScenario,
	// Consent tokens, each a use on its flow's ledger, in turns with the plain grant.
	"consent-token": consentTokenScenario,
	"create":        createScenario,
	"retrieve":      retrieveScenario,
	// retrieve with DPoP-bound tokens: what sender-constraining costs.
	"retrieve-dpop": retrieveDPoPScenario,
	"list-first":    listFirstScenario,
	"list-deep":     listDeepScenario,
	"mixed":         mixedScenario,
	"person-page":   personPageScenario,
	"webhook":       webhookScenario,
	// The delivery scenarios that leave rows and held deliveries behind go last.
	"webhook-isolation": webhookIsolationScenario,
	"webhook-backlog":   webhookBacklogScenario,
	"webhook-ordered":   webhookOrderedScenario,
	"webhook-throttle":  webhookThrottleScenario,
	// Withdrawals pushed to a data holder's receiver beside one that hangs,
	// and a poll stream drained.
	"ssf": ssfScenario,
}

// measure drives flowd with op and pgbench with files (vars defined) in
// turns: -slices stretches each, which together take the run's duration.
// A shared machine's speed drifts within minutes; taking turns lets both
// meet the same machine, so that their ratio means something.
func (b *bench) measure(ctx context.Context, name string, next loadgen.Next, vars map[string]string, files ...string) (Result, error) {
	return b.measureBeside(ctx, name, next, nil, vars, files...)
}

// measureBeside is measure with a reference: after each of next's turns,
// reference, when not nil, drives flowd for one of its own, so that a
// scenario compares with another on the same machine too.
func (b *bench) measureBeside(ctx context.Context, name string, next loadgen.Next, reference func(time.Duration),
	vars map[string]string, files ...string) (Result, error) {
	d := b.sliceDuration()
	var load, against sample
	pg, err := b.startPgbench(ctx, vars, files...)
	if err != nil {
		return Result{}, err
	}
	defer pg.Kill()
	for i := range b.o.slices {
		if b.against == nil {
			b.driveSlice(ctx, &load, d, next)
		} else {
			// The two builds go first in turn: the turn after pgbench's
			// runs slower.
			b.driveBoth(ctx, &load, &against, d, next, i%2 == 1)
		}
		if reference != nil {
			reference(d)
		}
		if err := b.pgbenchTurn(pg, d); err != nil {
			return Result{}, err
		}
	}
	db, dbPG, err := pg.Finish()
	if err != nil {
		return Result{}, err
	}
	if b.against != nil {
		r := against.result(name+" -against", b.o.concurrency)
		r.PeakRSSMiB = b.against.server.PeakRSSMiB()
		b.moreResults = append(b.moreResults, withPgbench(r, db, dbPG))
	}
	r := load.result(name, b.o.concurrency)
	return withPgbench(r, db, dbPG), nil
}

// driveBoth drives this build and the -against one for d each, the
// -against one first when againstFirst, adding what each measured to its
// own sample.
func (b *bench) driveBoth(ctx context.Context, load, against *sample, d time.Duration, next loadgen.Next, againstFirst bool) {
	driveAgainst := func() {
		b.swapAgainst()
		defer b.swapAgainst()
		b.driveSlice(ctx, against, d, next)
	}
	if againstFirst {
		driveAgainst()
	}
	b.driveSlice(ctx, load, d, next)
	if !againstFirst {
		driveAgainst()
	}
}

// sliceDuration is how long each turn of measure takes: pgbench counts
// whole seconds.
func (b *bench) sliceDuration() time.Duration {
	return max(time.Second, (b.o.duration / time.Duration(max(1, b.o.slices))).Truncate(time.Second))
}

// withPgbench fills in r's pgbench figures from run, during which
// PostgreSQL spent postgresCPU.
func withPgbench(r Result, run pgbench.Run, postgresCPU time.Duration) Result {
	r.PgbenchTPS = run.TPS()
	if r.PgbenchTPS > 0 {
		r.Ratio = r.RPS / r.PgbenchTPS
	}
	r.PgbenchPostgresCPUus = perCall(postgresCPU, run.Transactions)
	r.PgbenchClientCPUus = perCall(run.ClientCPU, run.Transactions)
	return r
}

// tokenScenario: POST /oauth/token with client credentials, a new token
// every time, as a client without a token cache would ask.
func tokenScenario(ctx context.Context, b *bench) (Result, error) {
	// What x/oauth2's client credentials source sends: HTTP basic
	// authentication and a form.
	return b.measure(ctx, "token", tokenRequests(b.main, constantForm(url.Values{"grant_type": {"client_credentials"}})),
		map[string]string{"client": b.main.ClientID}, "token")
}

// tokenRequests asks the token endpoint for a token of the body form
// gives, o's client authenticated by HTTP Basic.
func tokenRequests(o org, form func() []byte) loadgen.Next {
	header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(
		url.QueryEscape(o.ClientID)+":"+url.QueryEscape(o.ClientSecret))) + "\r\n" +
		"Content-Type: application/x-www-form-urlencoded\r\n"
	return func(_, _ int) (loadgen.Request, error) {
		return loadgen.Request{Method: "POST", Path: "/oauth/token", Header: header, Body: form(), Want: 200, Done: hasAccessToken}, nil
	}
}

// constantForm is a token request's body that is form each time.
func constantForm(form url.Values) func() []byte {
	body := []byte(form.Encode())
	return func() []byte { return body }
}

// hasAccessToken checks a token endpoint's answer.
func hasAccessToken(body []byte) error {
	var t struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return fmt.Errorf("token answer without access_token: %s", truncate(body, 200))
	}
	return nil
}

// createScenario: POST /api/flows without a webhook.
func createScenario(ctx context.Context, b *bench) (Result, error) {
	var n atomic.Int64
	return b.measure(ctx, "create", func(_, _ int) (loadgen.Request, error) {
		return b.main.request("POST", "/api/flows", createBody(int(n.Add(1)), ""), 201)
	}, map[string]string{"client": b.main.ClientID}, "create")
}

// randomSeeded is a random flow of the deep organization.
func randomSeeded(b *bench) string { return seededID(1 + rand.IntN(b.o.deepFlows)) }

// retrieveScenario: GET /api/flows/{id} of random flows among the deep
// organization's million.
func retrieveScenario(ctx context.Context, b *bench) (Result, error) {
	return b.measure(ctx, "retrieve", func(_, _ int) (loadgen.Request, error) {
		return b.deep.request("GET", "/api/flows/"+randomSeeded(b), nil, 200)
	}, map[string]string{"org": b.deep.ID, "flows": strconv.Itoa(b.o.deepFlows)}, "retrieve")
}

// listFirstScenario: GET /api/flows, the newest ten of the deep organization.
func listFirstScenario(ctx context.Context, b *bench) (Result, error) {
	return b.measure(ctx, "list-first", firstPage(b), map[string]string{"org": b.deep.ID}, "list_first")
}

func firstPage(b *bench) loadgen.Next {
	return func(_, _ int) (loadgen.Request, error) {
		return b.deep.request("GET", "/api/flows?limit=10", nil, 200)
	}
}

// deepCursor is the flow after which page ~10 000 (of ten) starts: 100 000
// flows below the newest, or the middle of a smaller seed.
func deepCursor(b *bench) (id string, page int) {
	depth := min(100_000, b.o.deepFlows/2)
	return seededID(b.o.deepFlows - depth), depth/10 + 1
}

// createdAt is a flow's created_at, as PostgreSQL writes it.
func (b *bench) createdAt(ctx context.Context, organizationID, flowID string) (string, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var at string
	err = conn.QueryRow(ctx, `select created_at::text from flows where organization_id = $1 and id = $2`,
		organizationID, flowID).Scan(&at)
	return at, err
}

// listDeepScenario: GET /api/flows?starting_after=… at page ~10 000. The
// first page takes turns with it, so that the two compare on the same
// machine: list-first's own scenario ran minutes before or after.
func listDeepScenario(ctx context.Context, b *bench) (Result, error) {
	cursor, page := deepCursor(b)
	b.note("list-deep reads page %d of ten flows (after %s) among %d", page, cursor, b.o.deepFlows)
	// pgbench's statement names the cursor's position, as flowd's does
	// once it knows it.
	at, err := b.createdAt(ctx, b.deep.ID, cursor)
	if err != nil {
		return Result{}, err
	}
	var first sample
	r, err := b.measureBeside(ctx, "list-deep", func(_, _ int) (loadgen.Request, error) {
		return b.deep.request("GET", "/api/flows?limit=10&starting_after="+cursor, nil, 200)
	}, func(d time.Duration) { b.driveSlice(ctx, &first, d, firstPage(b)) },
		map[string]string{"org": b.deep.ID, "cursor": cursor, "cursor_at": at}, "list_deep")
	if err != nil {
		return r, err
	}
	f := first.result("list-first", b.o.concurrency)
	r.FirstPageRPS, r.FirstPageP50ms = f.RPS, f.P50ms
	if f.RPS > 0 && f.P50ms > 0 {
		b.note("list-deep against the first page in turns of the same run: %.2f× its req/s (%.0f vs %.0f), %.2f× its p50 (%.2f vs %.2f ms)",
			r.RPS/f.RPS, r.RPS, f.RPS, r.P50ms/f.P50ms, r.P50ms, f.P50ms)
	}
	return r, nil
}

// mixedScenario: 70 % retrieve, 20 % list first page, 10 % create, all on
// the deep organization; pgbench runs the three scripts with the same weights.
func mixedScenario(ctx context.Context, b *bench) (Result, error) {
	var n atomic.Int64
	return b.measure(ctx, "mixed", func(_, _ int) (loadgen.Request, error) {
		switch x := rand.IntN(100); {
		case x < 70:
			return b.deep.request("GET", "/api/flows/"+randomSeeded(b), nil, 200)
		case x < 90:
			return b.deep.request("GET", "/api/flows?limit=10", nil, 200)
		default:
			return b.deep.request("POST", "/api/flows", createBody(int(n.Add(1)), ""), 201)
		}
	}, map[string]string{"org": b.deep.ID, "client": b.deep.ClientID,
		"flows": strconv.Itoa(b.o.deepFlows)}, "retrieve@70", "list_first@20", "create@10")
}

func pct(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}
