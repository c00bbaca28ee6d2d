package httpkit

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// The rate limit fields of draft-ietf-httpapi-ratelimit-headers, in the
// canonical form net/http writes, so that setting them skips canonicalizing.
const (
	headerRateLimitPolicy = "Ratelimit-Policy"
	headerRateLimit       = "Ratelimit"
)

// rateLimitPolicyName names flowd's one quota policy in both fields: every
// API request of a client counts against its limit per minute.
const rateLimitPolicyName = `"default"`

// rateLimiter holds API clients to their rate limits.
type rateLimiter struct {
	limits orgs.APILimits
	// lastPolicy is the RateLimit-Policy field made last (rateLimitPolicy).
	lastPolicy atomic.Pointer[policyField]
}

// limitRate counts an authenticated API request against its client's rate
// limit and tells the client where it stands: RateLimit-Policy (the limit
// per window) and RateLimit (what remains, and the seconds until the
// window resets) on every answer, success or not. A request past the limit
// is answered 429 with Retry-After and reaches no handler. A client without
// a limit gets neither field.
func (rl *rateLimiter) limitRate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		st := rl.limits.AdmitAPIRequest(Principal(c))
		if st.Limit == 0 {
			return next(c)
		}
		// One allocation holds both values; each keeps a capacity of one,
		// so that adding to either header does not touch the other.
		values := make([]string, 2)
		values[0], values[1] = rl.rateLimitPolicy(st.Limit), rateLimitState(st)
		h := c.Response().Header()
		h[headerRateLimitPolicy] = values[0:1:1]
		h[headerRateLimit] = values[1:2:2]
		if !st.Allowed {
			return &apperr.Error{Code: apperr.RateLimited, RetryAfter: st.Reset,
				Message: "This API client has made its " + strconv.Itoa(st.Limit) + " requests of the minute: try again in " +
					strconv.Itoa(int(st.Reset/time.Second)) + " seconds."}
		}
		return next(c)
	}
}

// policyField is a RateLimit-Policy field and the limit it states.
type policyField struct {
	limit int
	value string
}

// rateLimitPolicy is the RateLimit-Policy field of a limit per minute, e.g.
// "default";q=600;w=60. The last one made is kept: most clients have the
// default limit, so that most requests reuse it.
func (rl *rateLimiter) rateLimitPolicy(limit int) string {
	if last := rl.lastPolicy.Load(); last != nil && last.limit == limit {
		return last.value
	}
	p := &policyField{limit: limit, value: rateLimitPolicyField(limit)}
	rl.lastPolicy.Store(p)
	return p.value
}

func rateLimitPolicyField(limit int) string {
	b := make([]byte, 0, 32)
	b = append(b, rateLimitPolicyName+";q="...)
	b = strconv.AppendInt(b, int64(limit), 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, int64(orgs.RateLimitWindow/time.Second), 10)
	return string(b)
}

// rateLimitState is the RateLimit field of st, e.g. "default";r=599;t=42.
func rateLimitState(st orgs.RateLimitStatus) string {
	b := make([]byte, 0, 32)
	b = append(b, rateLimitPolicyName+";r="...)
	b = strconv.AppendInt(b, int64(st.Remaining), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, int64(st.Reset/time.Second), 10)
	return string(b)
}
