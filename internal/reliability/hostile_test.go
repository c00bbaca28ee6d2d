package reliability_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// rowCounts counts the rows of every table a request could change.
func rowCounts(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	out := map[string]int{}
	// River's own jobs are left out: its periodic maintenance inserts some
	// on its schedule; every delivery it could make has a webhook_events row.
	for _, table := range []string{"flows", "consent_requests", "flow_tasks", "flow_incidents", "webhook_events",
		"api_idempotency_keys", "flow_deletions", "login_requests", "login_codes", "refresh_tokens"} {
		out[table] = count(t, pool, "select count(*) from "+table)
	}
	return out
}

func body(fields map[string]any) string {
	b, _ := json.Marshal(fields)
	return string(b)
}

func valid(kv ...any) map[string]any {
	m := map[string]any{"nationalId": "12345678901", "lastName": "Nordmann", "redirectUrl": "https://bank.example/done"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// TestHostileInputIsRefusedAndChangesNothing sends a table of hostile
// requests: each gets a 4xx problem answer (never a 500) and leaves every
// table as it was.
func TestHostileInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Hostile Bank", "HOST")
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)
	a := mustDo(t, "POST", p.URL+"/api/flows", tok, createBody("EXIST1", "Berg", ""))
	if a.Status != 201 {
		t.Fatalf("create: %d %s", a.Status, a.Body)
	}
	var existing struct{ FlowID string }
	a.json(t, &existing)

	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	deepArray := `{"nationalId":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}`
	sqlish := []string{`' OR '1'='1`, `1; DROP TABLE flows;--`, `"); delete from flows; --`, `\x00`, `%27%20OR%201=1`}
	htmlish := []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, `{{.}}`, `${7*7}`}
	type tc struct {
		name    string
		method  string
		path    string
		body    string
		ctype   string
		headers []string
		want    int // 0: any 4xx
	}
	cases := []tc{
		{name: "huge body", method: "POST", path: "/api/flows", body: body(valid("lastName", strings.Repeat("x", 200<<10))), want: 413},
		{name: "huge body of spaces", method: "POST", path: "/api/flows", body: strings.Repeat(" ", 1<<20) + "{}", want: 413},
		{name: "deep object nesting", method: "POST", path: "/api/flows", body: deep, want: 400},
		{name: "deep array nesting", method: "POST", path: "/api/flows", body: deepArray, want: 400},
		{name: "invalid UTF-8", method: "POST", path: "/api/flows", body: `{"nationalId":"1","lastName":"` + "\xff\xfe" + `","redirectUrl":"https://bank.example/"}`, want: 400},
		{name: "NUL in lastName", method: "POST", path: "/api/flows", body: body(valid("lastName", "Nord\x00mann")), want: 400},
		{name: "NUL in nationalId", method: "POST", path: "/api/flows", body: body(valid("nationalId", "123\x00")), want: 400},
		{name: "control chars in lastName", method: "POST", path: "/api/flows", body: body(valid("lastName", "a\r\nb")), want: 400},
		{name: "not JSON", method: "POST", path: "/api/flows", body: "nationalId=1", want: 400},
		{name: "JSON null", method: "POST", path: "/api/flows", body: "null", want: 400},
		{name: "JSON array", method: "POST", path: "/api/flows", body: "[]", want: 400},
		{name: "two objects", method: "POST", path: "/api/flows", body: body(valid()) + body(valid()), want: 400},
		{name: "unknown field", method: "POST", path: "/api/flows", body: body(valid("organizationId", "x")), want: 400},
		{name: "wrong types", method: "POST", path: "/api/flows", body: `{"nationalId":1,"lastName":true,"redirectUrl":{}}`, want: 400},
		{name: "huge number", method: "POST", path: "/api/flows", body: `{"nationalId":1e999999}`, want: 400},
		{name: "text/plain", method: "POST", path: "/api/flows", body: body(valid()), ctype: "text/plain", want: 415},
		{name: "form body", method: "POST", path: "/api/flows", body: "a=b", ctype: "application/x-www-form-urlencoded", want: 415},
		{name: "overlong Idempotency-Key", method: "POST", path: "/api/flows", body: body(valid()), headers: []string{"Idempotency-Key", strings.Repeat("k", 256)}, want: 400},
		{name: "very long Idempotency-Key", method: "POST", path: "/api/flows", body: body(valid()), headers: []string{"Idempotency-Key", strings.Repeat("k", 16<<10)}},
		{name: "redirectUrl javascript:", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "javascript:alert(1)")), want: 400},
		{name: "redirectUrl data:", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "data:text/html,<script>alert(1)</script>")), want: 400},
		{name: "redirectUrl protocol-relative", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "//evil.example/")), want: 400},
		{name: "redirectUrl relative", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "/console")), want: 400},
		{name: "redirectUrl userinfo", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "https://bank.example@evil.example/")), want: 400},
		{name: "redirectUrl user:pass", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "https://u:p@bank.example/")), want: 400},
		{name: "redirectUrl http non-loopback", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "http://evil.example/")), want: 400},
		{name: "redirectUrl CRLF", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "https://bank.example/\r\nSet-Cookie: a=b")), want: 400},
		{name: "redirectUrl too long", method: "POST", path: "/api/flows", body: body(valid("redirectUrl", "https://bank.example/"+strings.Repeat("a", 2100))), want: 400},
		{name: "webhookUrl javascript:", method: "POST", path: "/api/flows", body: body(valid("webhookUrl", "javascript:alert(1)")), want: 400},
		{name: "webhookUrl file:", method: "POST", path: "/api/flows", body: body(valid("webhookUrl", "file:///etc/passwd")), want: 400},
		{name: "webhookUrl gopher:", method: "POST", path: "/api/flows", body: body(valid("webhookUrl", "gopher://127.0.0.1:6379/_FLUSHALL")), want: 400},
		{name: "webhookUrl userinfo", method: "POST", path: "/api/flows", body: body(valid("webhookUrl", "https://user:pw@hooks.example/")), want: 400},
		{name: "webhookUrl http non-loopback", method: "POST", path: "/api/flows", body: body(valid("webhookUrl", "http://169.254.169.254/latest/meta-data")), want: 400},
		{name: "referenceName too long", method: "POST", path: "/api/flows", body: body(valid("referenceName", strings.Repeat("r", 201))), want: 400},
		{name: "lastName too long", method: "POST", path: "/api/flows", body: body(valid("lastName", strings.Repeat("n", 201))), want: 400},
		{name: "nationalId too long", method: "POST", path: "/api/flows", body: body(valid("nationalId", strings.Repeat("1", 65))), want: 400},
	}
	for _, s := range append(sqlish, htmlish...) {
		cases = append(cases,
			tc{name: "nationalId " + s, method: "POST", path: "/api/flows", body: body(valid("nationalId", s)), want: 400},
			tc{name: "redirectUrl " + s, method: "POST", path: "/api/flows", body: body(valid("redirectUrl", s)), want: 400},
			tc{name: "webhookUrl " + s, method: "POST", path: "/api/flows", body: body(valid("webhookUrl", s)), want: 400},
			tc{name: "flow id " + s, method: "GET", path: "/api/flows/" + url.PathEscape(s), want: 404},
			tc{name: "delete id " + s, method: "DELETE", path: "/api/flows/" + url.PathEscape(s), want: 404},
			tc{name: "cancel id " + s, method: "POST", path: "/api/flows/" + url.PathEscape(s) + "/cancel", want: 404},
			tc{name: "tasks flowId " + s, method: "GET", path: "/api/tasks?flowId=" + url.QueryEscape(s), want: 404},
			tc{name: "status " + s, method: "GET", path: "/api/flows?status=" + url.QueryEscape(s), want: 400},
			tc{name: "starting_after " + s, method: "GET", path: "/api/flows?starting_after=" + url.QueryEscape(s)},
		)
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=101", "limit=1e9", "limit=99999999999999999999999", "limit=abc",
		"limit=%00", "limit=1&limit=2&limit=x", "archived=maybe", "archived=%0d%0a", "status=accepted%00",
		"starting_after=" + existing.FlowID + "&ending_before=" + existing.FlowID, "limit=" + strings.Repeat("9", 5000)} {
		cases = append(cases, tc{name: "query " + q, method: "GET", path: "/api/flows?" + q, want: 400})
	}
	cases = append(cases,
		tc{name: "tasks without flowId", method: "GET", path: "/api/tasks", want: 400},
		tc{name: "CRLF in path", method: "GET", path: "/api/flows/%0d%0aSet-Cookie:%20evil=1", want: 404},
		tc{name: "CRLF in query", method: "GET", path: "/api/flows?status=%0d%0aSet-Cookie:%20evil=1", want: 400},
		tc{name: "path traversal", method: "GET", path: "/api/flows/..%2f..%2fetc%2fpasswd", want: 404},
		tc{name: "the other organization's prefix as id", method: "GET", path: "/api/flows/HOST-1", want: 404},
	)

	before := rowCounts(t, pool)
	for _, c := range cases {
		headers := append([]string{}, c.headers...)
		if c.ctype != "" {
			headers = append(headers, "Content-Type", c.ctype)
		}
		a, err := do(c.method, p.URL+c.path, tok, c.body, headers...)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		switch {
		case a.Status >= 500:
			t.Errorf("%s: %d %s", c.name, a.Status, a.Body)
		case c.want != 0 && a.Status != c.want:
			t.Errorf("%s: %d %.300s; want %d", c.name, a.Status, a.Body, c.want)
		case a.Status < 400:
			if c.method == "GET" {
				continue // a harmless read
			}
			t.Errorf("%s: %d %.300s; want a 4xx", c.name, a.Status, a.Body)
		case !strings.HasPrefix(a.Header.Get("Content-Type"), "application/problem+json"):
			t.Errorf("%s: %d with Content-Type %q; want a problem", c.name, a.Status, a.Header.Get("Content-Type"))
		}
		if a.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s: answered with Set-Cookie %q", c.name, a.Header.Get("Set-Cookie"))
		}
	}
	after := rowCounts(t, pool)
	for table, n := range before {
		if after[table] != n {
			t.Errorf("%s: %d rows before the hostile requests, %d after", table, n, after[table])
		}
	}

	// Metacharacters where they are legitimate (a last name, a reference)
	// are stored and returned byte for byte.
	for _, s := range append(sqlish[:3], htmlish...) {
		a := mustDo(t, "POST", p.URL+"/api/flows", tok, body(valid("lastName", s, "referenceName", s)))
		if a.Status != 201 {
			t.Errorf("lastName %q: %d %s", s, a.Status, a.Body)
			continue
		}
		var c struct{ FlowID string }
		a.json(t, &c)
		var got struct {
			Flow struct {
				ReferenceName string `json:"referenceName"`
				Data          struct {
					LastName string `json:"lastName"`
				} `json:"data"`
			} `json:"flow"`
		}
		mustDo(t, "GET", p.URL+"/api/flows/"+c.FlowID, tok, "").json(t, &got)
		if got.Flow.Data.LastName != s || got.Flow.ReferenceName != s {
			t.Errorf("%q came back as %q / %q", s, got.Flow.Data.LastName, got.Flow.ReferenceName)
		}
	}
	if n := count(t, pool, "select count(*) from flows"); n != 1+3+len(htmlish) {
		t.Errorf("%d flows, want %d", n, 1+3+len(htmlish))
	}
}

// TestRawHeaderInjection sends requests that net/http would refuse to
// write: raw CR/LF and NUL in the request line and in headers. flowd answers
// each with a 4xx (or closes the connection) and never reflects a header.
func TestRawHeaderInjection(t *testing.T) {
	t.Parallel()
	p := startFlowd(t, dbtest.NewURL(t), "", nil)
	for _, raw := range []string{
		"GET /api/flows/a\r\nSet-Cookie: evil=1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /api/flows HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\rSet-Cookie: evil=1\r\n\r\n",
		"GET /api/flows?limit=1\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /consent/a%0d%0aSet-Cookie:evil=1 HTTP/1.1\r\nHost: x\r\n\r\n",
		// Content-Length is the body's: one byte more would leave the server
		// waiting for it until its read timeout.
		"POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 39\r\n\r\ngrant_type=client_credentials%0d%0aX: y",
		"GET /console?next=%0d%0aLocation:%20https://evil.example HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		conn, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(testwait.Deadline(t))
		if _, err := conn.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			continue // the connection was closed: refused
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 || (resp.StatusCode < 400 && resp.StatusCode/100 != 3) {
			t.Errorf("%q: %d", raw, resp.StatusCode)
		}
		if c := resp.Header.Get("Set-Cookie"); strings.Contains(c, "evil") {
			t.Errorf("%q: reflected Set-Cookie %q", raw, c)
		}
		if l, err := url.Parse(resp.Header.Get("Location")); err != nil || l.Host != "" && l.Host != "x" && l.Host != p.Addr {
			t.Errorf("%q: Location %q", raw, resp.Header.Get("Location"))
		}
		if l := resp.Header.Get("Location"); strings.ContainsAny(l, "\r\n") {
			t.Errorf("%q: Location %q", raw, l)
		}
	}
}
