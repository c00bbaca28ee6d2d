package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// TestDriveBothTakesTurnsAndKeepsTheirCountsApart: with -against, each
// build's turn drives its own flowd and adds to its own sample, the
// -against one goes first when asked, and afterwards the flowd under load
// is this build's again.
func TestDriveBothTakesTurnsAndKeepsTheirCountsApart(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		turns []string // which server answered, runs of one collapsed
	)
	serve := func(name string, served *atomic.Int64) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" { // driveSlice reads flowd's allocations around a turn
				http.NotFound(w, r)
				return
			}
			served.Add(1)
			mu.Lock()
			if len(turns) == 0 || turns[len(turns)-1] != name {
				turns = append(turns, name)
			}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{}`)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	var servedThis, servedAgainst atomic.Int64
	this, other := serve("this", &servedThis), serve("against", &servedAgainst)
	thisLoad := testLoad(t, this, 2)
	b := &bench{base: this.URL, load: thisLoad, transport: &http.Transport{}, against: &instance{base: other.URL, load: testLoad(t, other, 2)}}
	next := func(_, _ int) (loadgen.Request, error) {
		return loadgen.Request{Method: "GET", Path: "/api/flows", Want: 200}, nil
	}

	var load, against sample
	b.driveBoth(context.Background(), &load, &against, runLimit, upTo(5, next), true)
	b.driveBoth(context.Background(), &load, &against, runLimit, upTo(10, next), false)

	if want := []string{"against", "this", "against"}; !slices.Equal(turns, want) {
		t.Errorf("turns went to %v, want %v", turns, want)
	}
	for _, c := range []struct {
		name   string
		s      sample
		served int64
	}{{"this", load, servedThis.Load()}, {"-against", against, servedAgainst.Load()}} {
		// Two turns each, of two workers' five requests.
		if c.s.Errors != 0 || len(c.s.Latencies) != 20 || c.served != 20 {
			t.Errorf("%s: %d requests counted (%d errors), its server answered %d; want 20", c.name, len(c.s.Latencies), c.s.Errors, c.served)
		}
	}
	if b.base != this.URL || b.load != thisLoad {
		t.Error("after the turns, the flowd under load is not this build's")
	}
}
