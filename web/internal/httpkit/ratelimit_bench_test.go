package httpkit

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// BenchmarkLimitRate measures what limitRate adds to an authenticated API
// request: counting it in its client's window and writing both fields. The
// limit is high enough never to refuse. It needs no database: admitting
// never reads one.
func BenchmarkLimitRate(b *testing.B) {
	rl := &rateLimiter{limits: orgs.NewLimits(nil, orgs.LimitsConfig{PerMinute: identity.MaxRateLimit})}
	handler := rl.limitRate(func(echo.Context) error { return nil })
	e := echo.New()
	newContext := func(clientID string) echo.Context {
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/api/flows", nil), httptest.NewRecorder())
		c.Set(principalKey, identity.Principal{OrganizationID: "org", ClientID: clientID})
		return c
	}
	b.Run("one client", func(b *testing.B) {
		c := newContext("fc_bench")
		b.ReportAllocs()
		for b.Loop() {
			if err := handler(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one client, parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c := newContext("fc_bench")
			for pb.Next() {
				if err := handler(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("a client per goroutine, parallel", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c := newContext("fc_bench_" + strconv.FormatInt(n.Add(1), 10))
			for pb.Next() {
				if err := handler(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
