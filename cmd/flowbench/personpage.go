package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// benchPerson is the national id of the person whose own page the
// person-page scenario reads: its flows are among the deep organization's
// million, and one is at another organization.
const benchPerson = "PERSONBENCH1"

// hiddenField is an <input type="hidden"> of flowd's forms.
var hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)"`)

// reindexDeep fills in the person index of the seeded flows, which COPY
// leaves empty, with the command an operator runs after upgrading, and
// notes how long it took.
func (b *bench) reindexDeep(ctx context.Context) error {
	start := time.Now()
	var out struct {
		Indexed int64 `json:"indexed"`
	}
	if err := b.cli(ctx, &out, "flows", "reindex"); err != nil {
		return err
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	b.note("flowd flows reindex filled the person index of %d flows in %s", out.Indexed, took)
	fmt.Fprintf(b.out, "  person index filled in %s\n", took)
	return nil
}

// personPageScenario: GET /my of a person with four consent requests (three
// accepted, two of them among the deep organization's million flows, one
// waiting), signed in with the test eID. A retrieve and a create take turns
// with it, so that they compare on the same machine: a retrieve is the read
// the page is judged against, a create the request that, like each view of
// the page, writes and commits (the view's audit entries); no pgbench.
func personPageScenario(ctx context.Context, b *bench) (Result, error) {
	cookie, err := b.personWithConsents(ctx)
	if err != nil {
		return Result{}, err
	}
	page := func(_, _ int) (loadgen.Request, error) {
		return loadgen.Request{Method: "GET", Path: "/my", Header: "Cookie: " + cookie + "\r\nAccept: text/html\r\n", Want: 200}, nil
	}
	retrieve := func(_, _ int) (loadgen.Request, error) {
		return b.deep.request("GET", "/api/flows/"+randomSeeded(b), nil, 200)
	}
	var created atomic.Int64
	create := func(_, _ int) (loadgen.Request, error) {
		return b.main.request("POST", "/api/flows", createBody(int(created.Add(1)), ""), 201)
	}
	var mine, retrieved, creates sample
	d := b.sliceDuration()
	for range b.o.slices {
		b.driveSlice(ctx, &mine, d, page)
		b.driveSlice(ctx, &retrieved, d, retrieve)
		b.driveSlice(ctx, &creates, d, create)
	}
	r := mine.result("person-page", b.o.concurrency)
	ref := retrieved.result("retrieve", b.o.concurrency)
	r.RetrieveRPS, r.RetrieveP50ms = ref.RPS, ref.P50ms
	c := creates.result("create", b.o.concurrency)
	r.CreateRPS, r.CreateP50ms = c.RPS, c.P50ms
	for _, other := range []Result{ref, c} {
		if other.P50ms > 0 && other.RPS > 0 {
			b.note("person-page against %s in turns of the same run: %.2f× its p50 (%.2f vs %.2f ms), %.2f× its req/s (%.0f vs %.0f)",
				other.Scenario, r.P50ms/other.P50ms, r.P50ms, other.P50ms, r.RPS/other.RPS, r.RPS, other.RPS)
		}
	}
	return r, nil
}

// personWithConsents creates benchPerson's requests, signs the person in
// with the test eID, accepts three of them and returns the Cookie header of
// the signed-in browser.
func (b *bench) personWithConsents(ctx context.Context) (string, error) {
	body := func() []byte {
		m, _ := json.Marshal(map[string]string{"nationalId": benchPerson, "lastName": "Nordmann",
			"redirectUrl": "https://example.com/done", "referenceName": "flowbench person"})
		return m
	}
	var links []string
	for _, o := range []org{b.deep, b.deep, b.main, b.deep} {
		answer, err := b.do(ctx, o, "POST", "/api/flows", body(), 201)
		if err != nil {
			return "", err
		}
		created, err := consentLinkOf(answer)
		if err != nil {
			return "", err
		}
		links = append(links, created.href)
	}
	return b.acceptAs(ctx, benchPerson, links[:3])
}

// acceptAs signs person in with the test eID on their own page, accepts
// the requests behind links, and returns the Cookie header of the
// signed-in browser.
func (b *bench) acceptAs(ctx context.Context, person string, links []string) (string, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return "", err
	}
	base, err := url.Parse(b.base)
	if err != nil {
		return "", err
	}
	// Redirects are followed within flowd; the organization's, after a
	// decision, is not flowd's to serve.
	client := &http.Client{Jar: jar, Transport: b.transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != base.Host || len(via) > 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	form, err := fetch(ctx, client, "GET", b.base+"/my/login", nil)
	if err != nil {
		return "", err
	}
	v := hiddenFields(form)
	v.Set("national_id", person)
	v.Set("level", "substantial")
	if page, err := fetch(ctx, client, "POST", b.base+"/idp/login", v); err != nil || !strings.Contains(page, "my-consent") {
		return "", fmt.Errorf("the test eID's sign-in did not reach /my: %v %.500s", err, page)
	}
	for _, link := range links {
		decide, err := fetch(ctx, client, "GET", link, nil)
		if err != nil {
			return "", err
		}
		d := hiddenFields(decide)
		d.Set("decision", "accept")
		if _, err := fetch(ctx, client, "POST", link, d); err != nil {
			return "", err
		}
	}
	var cookies []string
	for _, c := range jar.Cookies(base) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	return strings.Join(cookies, "; "), nil
}

// fetch sends a page request (a form's fields when form is set), follows
// redirects within flowd, and returns the final page; an answer other than
// 200, or a redirect out of flowd, is an error.
func fetch(ctx context.Context, client *http.Client, method, target string, form url.Values) (string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
		return "", fmt.Errorf("%s %s: %d at %s: %.500s", method, target, resp.StatusCode, resp.Request.URL, page)
	}
	return string(page), nil
}

func hiddenFields(page string) url.Values {
	v := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}
