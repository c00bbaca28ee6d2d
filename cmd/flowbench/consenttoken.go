package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// The data holder's resource the consent-token scenario's tokens open,
// and the people whose consents they carry (benchConsentPeople1, 2…).
const (
	benchResource      = "https://api.tax.example/income"
	benchConsentPeople = "CONSENTBENCH"
	benchDefinition    = "bench-income"
)

// consentTokenScenario: POST /oauth/token for an RFC 9396 consent token,
// the client authenticated by HTTP Basic, against the plain
// client_credentials grant (the token scenario's request) in turns of the
// same run. The tokens are of -token-consents accepted flows in turn, as a
// lender asks for many people's data; with 1, every client asks for the
// same consent, whose row each use then waits for. Each consent token is
// also a use on the flow's ledger (a write and a flow.used event, in one
// transaction), which the plain grant does not have. No pgbench: the figure
// is the ratio to the grant.
func consentTokenScenario(ctx context.Context, b *bench) (Result, error) {
	flowIDs, err := b.consentToTokens(ctx, b.o.tokenFlows)
	if err != nil {
		return Result{}, err
	}
	forms := make([][]byte, len(flowIDs))
	for i, id := range flowIDs {
		forms[i] = []byte(url.Values{"grant_type": {"client_credentials"}, "resource": {benchResource},
			"authorization_details": {`[{"type":"urn:flowd:consent","id":"` + id + `"}]`}}.Encode())
	}
	var next atomic.Uint64
	consent := tokenRequests(b.main, func() []byte { return forms[next.Add(1)%uint64(len(forms))] })
	grant := tokenRequests(b.main, constantForm(url.Values{"grant_type": {"client_credentials"}}))
	var tokens, grants sample
	d := b.sliceDuration()
	for i := range b.o.slices {
		// Each goes first in turn: the machine may favour the first.
		if i%2 == 1 {
			b.driveSlice(ctx, &grants, d, grant)
		}
		b.driveSlice(ctx, &tokens, d, consent)
		if i%2 == 0 {
			b.driveSlice(ctx, &grants, d, grant)
		}
	}
	r := tokens.result("consent-token", b.o.concurrency)
	g := grants.result("token", b.o.concurrency)
	r.GrantRPS, r.GrantP50ms = g.RPS, g.P50ms
	if g.RPS > 0 && g.P50ms > 0 {
		b.note("consent-token (%d consents) against the client_credentials grant in turns of the same run: %.2f× its req/s (%.0f vs %.0f), %.2f× its p50 (%.2f vs %.2f ms)",
			len(flowIDs), r.RPS/g.RPS, r.RPS, g.RPS, r.P50ms/g.P50ms, r.P50ms, g.P50ms)
	}
	return r, nil
}

// consentToTokens seeds what a consent token needs: the data holder and the
// definition naming its resource (benchHolder), and n flows of that
// definition, which benchConsentPeople accept with the test eID. It returns
// the flows' ids.
func (b *bench) consentToTokens(ctx context.Context, n int) ([]string, error) {
	if _, err := b.benchHolder(ctx); err != nil {
		return nil, err
	}
	return b.acceptedConsents(ctx, benchConsentPeople, max(n, 1))
}

// benchHolder seeds, once a run, a data holder that registers benchResource
// and the main organization's definition benchDefinition naming it, and
// returns the holder.
func (b *bench) benchHolder(ctx context.Context) (org, error) {
	if b.holder != nil {
		return *b.holder, nil
	}
	holder, err := b.seedOrg(ctx, "Bench Tax Authority", "BTAX")
	if err != nil {
		return org{}, err
	}
	resource, _ := json.Marshal(map[string]string{"uri": benchResource, "name": "Income records"})
	if _, err := b.do(ctx, holder, "POST", "/api/resources", resource, 201); err != nil {
		return org{}, fmt.Errorf("register the resource: %w", err)
	}
	definition, _ := json.Marshal(map[string]any{"id": benchDefinition,
		"title":          map[string]string{"en": "Share your income with Bench Bank", "nb": "Del inntekten din med Bench Bank"},
		"purpose":        map[string]string{"en": "We fetch your income from the tax authority.", "nb": "Vi henter inntekten din fra Skatteetaten."},
		"dataCategories": []map[string]string{{"en": "Income", "nb": "Inntekt"}},
		"validity":       "P90D", "resources": []string{benchResource}})
	if _, err := b.do(ctx, b.main, "POST", "/api/flow-definitions", definition, 201); err != nil {
		return org{}, fmt.Errorf("create the definition: %w", err)
	}
	b.holder = &holder
	return holder, nil
}

// consentLink is a created flow of benchDefinition and its consent link.
type consentLink struct{ flowID, href string }

// createConsents creates a flow of benchDefinition for each of people,
// with the run's concurrency, and returns them in the order of people.
func (b *bench) createConsents(ctx context.Context, people []string) ([]consentLink, error) {
	out := make([]consentLink, len(people))
	var next atomic.Int64
	s := b.load.Drive(ctx, time.Hour, func(_, _ int) (loadgen.Request, error) {
		i := int(next.Add(1)) - 1
		if i >= len(people) {
			return loadgen.Request{}, loadgen.ErrWorkerDone
		}
		body, _ := json.Marshal(map[string]string{"nationalId": people[i], "lastName": "Nordmann",
			"redirectUrl": "https://example.com/done", "flowDefinitionId": benchDefinition})
		req, err := b.main.request("POST", "/api/flows", body, 201)
		req.Done = func(answer []byte) (err error) {
			out[i], err = consentLinkOf(answer)
			return err
		}
		return req, err
	})
	if s.Errors > 0 {
		return nil, fmt.Errorf("%d of %d creates failed, the first: %s", s.Errors, len(people), s.FirstErr)
	}
	return out, nil
}

// consentLinkOf reads a created flow's id and consent link from the
// create's answer.
func consentLinkOf(answer []byte) (consentLink, error) {
	var created struct {
		FlowID string `json:"flowId"`
		Links  struct {
			Consent struct {
				Href string `json:"href"`
			} `json:"consent"`
		} `json:"_links"`
	}
	if err := json.Unmarshal(answer, &created); err != nil || created.Links.Consent.Href == "" {
		return consentLink{}, fmt.Errorf("a created flow without its consent link: %v %s", err, truncate(answer, 200))
	}
	return consentLink{flowID: created.FlowID, href: created.Links.Consent.Href}, nil
}
