package webtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testlog"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// LimitedAPI is the real server whose API clients (FakeIdentity's tokens)
// may make perMinute requests a minute.
type LimitedAPI struct {
	URL  string
	Srv  *Server
	Pool *pgxpool.Pool
}

// NewLimitedAPI starts a LimitedAPI. Its limits' clock stands still, so
// that a test's requests all fall in one window however slow the machine.
func NewLimitedAPI(t *testing.T, perMinute int) LimitedAPI {
	t.Helper()
	cfg, err := config.Load(func(k string) string {
		if k == "FLOWD_API_RATE_LIMIT" {
			return strconv.Itoa(perMinute)
		}
		return ""
	}, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.New(t)
	frozen := time.Now()
	limits := orgs.NewLimits(pool, orgs.LimitsConfig{PerMinute: perMinute, Log: testlog.New(t), Now: func() time.Time { return frozen }})
	srv := NewServer(t, web.Deps{Config: cfg, Pool: pool, Bearer: FakeIdentity{}, Audit: FakeIdentity{}, Limits: limits})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return LimitedAPI{URL: hs.URL, Srv: srv, Pool: pool}
}

// Call makes one API request, checked against the OpenAPI document.
func (a LimitedAPI) Call(t *testing.T, method, path, token, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := openapitest.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
