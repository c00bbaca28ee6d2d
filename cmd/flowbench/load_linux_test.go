package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// testLoad is the load generator against srv with the given workers.
func testLoad(t *testing.T, srv *httptest.Server, workers int) *loadgen.Load {
	t.Helper()
	l, err := loadgen.New(srv.URL, workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// runLimit bounds a test's run, which ends sooner, when every worker has
// sent its requests: it only keeps a broken loop from hanging the test.
const runLimit = 5 * time.Minute

// upTo makes next give each worker its requests up to its n-th since the
// load was made: the run ends when every worker has sent them, however
// slow the machine.
func upTo(n int, next loadgen.Next) loadgen.Next {
	return func(w, i int) (loadgen.Request, error) {
		if i >= n {
			return loadgen.Request{}, loadgen.ErrWorkerDone
		}
		return next(w, i)
	}
}
