package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestInstancesExpireEachAcceptanceOnce runs two, then three flowd
// processes on one database. Acceptances of a consent definition with a
// validity, given through each in turn, reach their validUntil: each becomes
// Expired exactly once, and its flow.expired webhook arrives exactly once.
func TestInstancesExpireEachAcceptanceOnce(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) { expireEachAcceptanceOnce(t, instances) })
	}
}

func expireEachAcceptanceOnce(t *testing.T, instances int) {
	dbURL := dbtest.NewURL(t)
	ps := startInstances(t, dbURL, instances, map[string]string{"FLOWD_CONSENT_AUTH": "none"})
	first, last := ps[0], ps[instances-1]
	tn := newTenant(t, first.Env, "Expiring Bank", "EXP")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, first.URL)
	pool := openPool(t, dbURL)

	definition, _ := json.Marshal(map[string]any{"id": "yearly",
		"title": map[string]string{"en": "Share your income", "nb": "Del inntekten din"}, "purpose": map[string]string{"en": "We check it.", "nb": "Vi sjekker den."},
		"dataCategories": []map[string]string{{"en": "Income", "nb": "Inntekt"}}, "validity": "P1Y", "assuranceLevel": "low"})
	if r := mustDo(t, "POST", first.URL+"/api/flow-definitions", tok, string(definition)); r.Status != http.StatusCreated {
		t.Fatalf("publish the definition: %d %s", r.Status, r.Body)
	}
	n := 12
	if long() {
		n = 60
	}
	next := roundRobin(ps)
	ids := make([]string, n)
	for i := range ids {
		base := next()
		body, _ := json.Marshal(map[string]string{"nationalId": fmt.Sprintf("EXP%d", i), "lastName": "Expiring",
			"redirectUrl": "https://bank.example/done", "webhookUrl": rcv.URL(), "flowDefinitionId": "yearly"})
		r := mustDo(t, "POST", base+"/api/flows", tok, string(body))
		var c struct {
			FlowID string `json:"flowId"`
			Links  struct {
				Consent struct{ Href string } `json:"consent"`
			} `json:"_links"`
		}
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		r.json(t, &c)
		ids[i] = c.FlowID
		accept(t, strings.Replace(c.Links.Consent.Href, first.URL, base, 1))
	}
	for _, id := range ids {
		var v consentView
		mustDo(t, "GET", first.URL+"/api/flows/"+id, tok, "").json(t, &v)
		if v.Flow.Consent.Status != "Accepted" || v.Flow.Consent.ValidUntil == nil {
			t.Fatalf("flow %s after the acceptance: %+v", id, v.Flow.Consent)
		}
	}

	// A year passes: the acceptances' validity ends, and River's scheduler
	// would make their jobs available.
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `update flows set valid_until = now() - interval '1 second' where organization_id = $1 and id = any($2::uuid[])`, tn.OrgID, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update flows_river.river_job set scheduled_at = now() where kind = 'flowd.consent_expiry'`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every acceptance expired", func() bool {
		var page struct {
			Data []struct{ ID string } `json:"data"`
		}
		mustDo(t, "GET", last.URL+"/api/flows?archived=true&status=Expired&limit=100", tok, "").json(t, &page)
		return len(page.Data) == n
	})
	checkDelivered(t, pool, rcv)
	expired := map[string]int{}
	for _, d := range rcv.deliveries() {
		if d.Type == "flow.expired" {
			expired[d.FlowID]++
		}
	}
	for _, id := range ids {
		if expired[id] != 1 {
			t.Errorf("flow %s: flow.expired arrived %d times, want once", id, expired[id])
		}
		var v consentView
		mustDo(t, "GET", last.URL+"/api/flows/"+id, tok, "").json(t, &v)
		if v.Flow.Consent.Status != "Expired" || v.Flow.Consent.ExpiredAt == nil || v.Flow.Version != 4 { // created, opened, accepted, expired
			t.Errorf("flow %s: %+v, version %d", id, v.Flow.Consent, v.Flow.Version)
		}
	}
}

// consentView is what the test reads of a retrieved flow.
type consentView struct {
	Flow struct {
		Version int `json:"version"`
		Consent struct {
			Status     string  `json:"status"`
			ValidUntil *string `json:"validUntil"`
			ExpiredAt  *string `json:"expiredAt"`
		} `json:"consent"`
	} `json:"flow"`
}

// accept opens a consent link in a browser of its own and accepts.
func accept(t *testing.T, link string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRE.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no decision form at %s: %d", link, resp.StatusCode)
	}
	resp, err = c.PostForm(link, url.Values{"_csrf": {string(m[1])}, "decision": {"accept"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept at %s: %d", link, resp.StatusCode)
	}
}
