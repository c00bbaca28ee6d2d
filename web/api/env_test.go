package api_test

import (
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// apiEnv is the API tests' environment: webtest's, with the requests these
// tests make of it besides.
type apiEnv struct{ *webtest.APIEnv }

func newAPI(t testing.TB, opts ...webtest.EnvOption) *apiEnv {
	t.Helper()
	return &apiEnv{webtest.NewAPI(t, opts...)}
}
