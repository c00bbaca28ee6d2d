package reliability_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestInstancesUnderLoad runs two, then three flowd processes on one
// database behind one round-robin balancer. Clients create flows through
// all of them at once: no flow number is handed out twice. Many browsers
// decide the same consent at the same moment through all of them: exactly
// one decision wins, the rest are told it is closed. Every webhook arrives
// exactly once.
func TestInstancesUnderLoad(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			underLoad(t, instances)
		})
	}
}

func underLoad(t *testing.T, instances int) {
	dbURL := dbtest.NewURL(t)
	ps := startInstances(t, dbURL, instances, map[string]string{"FLOWD_CONSENT_AUTH": "none"})
	first := ps[0]
	tn := newTenant(t, first.Env, "Twin Bank", "TWIN")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, first.URL)
	pool := openPool(t, dbURL)

	stop := make(chan struct{})
	l, wg := runLoad(t, roundRobin(ps), tok, rcv.URL(), 4, stop)
	// The load goes on until there are enough creates to race, however
	// fast or slow the machine (or Citus) makes them.
	creates := 40
	if long() {
		creates = 400
	}
	eventually(t, fmt.Sprintf("%d creates acknowledged", creates), func() bool { return len(l.acknowledged()) >= creates })
	close(stop)
	wg.Wait()
	acked := l.acknowledged()
	for _, o := range l.results() {
		if o.Status != 201 {
			t.Errorf("a create through %d healthy instances got %d", instances, o.Status)
		}
	}
	for i, p := range ps {
		if n := sample(t, scrape(t, p.URL), `flowd_http_requests_total{method="POST",route="/api/flows",status="201"}`); n == 0 {
			t.Errorf("instance %d created no flow: the load did not reach every instance", i)
		}
	}
	checkIntegrity(t, pool, acked) // includes: no duplicate flow numbers
	if n := count(t, pool, `select count(distinct flow_number) from flows where organization_id = $1`, tn.OrgID); n != len(acked) {
		t.Errorf("%d distinct flow numbers for %d flows", n, len(acked))
	}

	// Racing decisions on one consent, through every instance.
	races := 3
	if long() {
		races = 10
	}
	for r := range races {
		id, link := createFlow(t, first.URL, tok, fmt.Sprintf("RACE%d", r), rcv.URL())
		const browsers = 8
		type ready struct {
			client *http.Client
			form   url.Values
			target string
		}
		var contenders []ready
		for i := range browsers {
			target := strings.Replace(link, first.URL, ps[i%instances].URL, 1)
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := c.Get(target)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := csrfRE.FindSubmatch(body)
			if m == nil {
				t.Fatalf("no decision form at %s: %d", target, resp.StatusCode)
			}
			decision := "accept"
			if i%3 == 0 {
				decision = "reject"
			}
			contenders = append(contenders, ready{c, url.Values{"_csrf": {string(m[1])}, "decision": {decision}}, target})
		}
		var start sync.WaitGroup
		start.Add(1)
		statuses := make([]int, browsers)
		var race sync.WaitGroup
		for i, c := range contenders {
			race.Go(func() {
				start.Wait()
				resp, err := c.client.PostForm(c.target, c.form)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			})
		}
		start.Done()
		race.Wait()
		won := 0
		for i, s := range statuses {
			switch {
			case s == http.StatusSeeOther:
				won++
			case s >= 500 || s < 400:
				t.Errorf("race %d, browser %d: %d", r, i, s)
			}
		}
		if won != 1 {
			t.Errorf("race %d: %d decisions won (statuses %v); want exactly one", r, won, statuses)
		}
		if n := count(t, pool, `select count(*) from webhook_events where organization_id = $1 and flow_id = $2 and type in ('flow.accepted', 'flow.rejected')`, tn.OrgID, id); n != 1 {
			t.Errorf("race %d: %d decision events", r, n)
		}
		var v flowView
		mustDo(t, "GET", ps[r%instances].URL+"/api/flows/"+id, tok, "").json(t, &v)
		if v.Flow.Version != 3 { // created 1, opened 2, decided 3
			t.Errorf("race %d: version %d after one open and one decision, want 3", r, v.Flow.Version)
		}
	}

	checkDelivered(t, pool, rcv)
	seen := map[string]int{}
	for _, d := range rcv.deliveries() {
		seen[d.ID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("webhook %s delivered %d times by %d healthy instances, want once", id, n, instances)
		}
	}
}

// createFlow creates one flow and returns its id and consent link.
func createFlow(t *testing.T, base, tok, nationalID, hook string) (string, string) {
	t.Helper()
	a := mustDo(t, "POST", base+"/api/flows", tok, createBody(nationalID, "Racer", hook))
	if a.Status != 201 {
		t.Fatalf("create: %d %s", a.Status, a.Body)
	}
	var c struct {
		FlowID string `json:"flowId"`
		Links  struct {
			Consent struct{ Href string } `json:"consent"`
		} `json:"_links"`
	}
	a.json(t, &c)
	return c.FlowID, c.Links.Consent.Href
}
