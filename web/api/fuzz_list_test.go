package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/webtest"
)

// FuzzFlowListQuery feeds GET /api/flows arbitrary query strings: the answer
// is a page (200) within the limit asked for, or a 400 naming the offending
// parameter; never anything else, and always what the OpenAPI document says
// (Call validates every response).
func FuzzFlowListQuery(f *testing.F) {
	for _, seed := range []string{
		"", "limit=1", "limit=100", "limit=0", "limit=101", "limit=-1", "limit=abc", "limit=1e3", "limit=%00",
		"archived=true", "archived=false", "archived=yes", "status=Accepted", "status=Opened&archived=true", "status=bogus",
		"starting_after=00000000-0000-0000-0000-000000000000", "ending_before=not-an-id",
		"starting_after=a&ending_before=b", "limit=1&limit=2", "%zz", "limit=99999999999999999999", "&&&=",
		"starting_after=%27%20or%201%3D1--", "status=%3Cscript%3E",
	} {
		f.Add(seed)
	}
	e := newAPI(f)
	for range 3 {
		e.Create(f, webtest.TokA, nil)
	}
	f.Fuzz(func(t *testing.T, query string) {
		// Bytes no HTTP client may put in a request line (space, controls,
		// non-ASCII, '#') are sent percent-encoded, as a client would.
		var b strings.Builder
		for i := 0; i < len(query); i++ {
			if c := query[i]; c <= ' ' || c >= 0x7f || c == '#' {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
		query = b.String()
		r := e.Call(t, "GET", "/api/flows?"+query, webtest.TokA, "")
		switch r.Status {
		case 200:
			var page struct {
				HasMore *bool            `json:"has_more"`
				Data    []map[string]any `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &page); err != nil || page.HasMore == nil || page.Data == nil {
				t.Fatalf("200 without a page for %q: %s", query, r.Body)
			}
			limit := 10
			if v, err := url.ParseQuery(query); err == nil && v.Get("limit") != "" {
				limit, _ = strconv.Atoi(v.Get("limit"))
			}
			if len(page.Data) > limit {
				t.Fatalf("%d items for %q", len(page.Data), query)
			}
			for _, it := range page.Data {
				if it["organizationId"] != webtest.OrgA {
					t.Fatalf("another organization's flow listed for %q: %v", query, it)
				}
			}
		case 400:
			var p httpkit.Problem
			if json.Unmarshal(r.Body, &p) != nil || p.Status != 400 {
				t.Fatalf("400 that is not a problem for %q: %s", query, r.Body)
			}
		default:
			t.Fatalf("status %d for %q: %s", r.Status, query, r.Body)
		}
	})
}
