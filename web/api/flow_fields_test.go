package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/fieldtest"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
)

// TestTheFlowEnvelopeCarriesEveryFieldOfAFlow: each field of flows.Flow is
// in GET /api/flows/:id's body (envelopeOf), or is
// named here with why not, so that a field added to the flow and forgotten
// by the API fails here.
func TestTheFlowEnvelopeCarriesEveryFieldOfAFlow(t *testing.T) {
	t.Parallel()
	writer := identity.Principal{OrganizationID: "org", Scopes: []string{identity.ScopeFlowsRead, identity.ScopeFlowsWrite}}
	render := func(f flows.Flow) string {
		b, err := json.Marshal(envelopeOf(f, writer))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fieldtest.Reaches(t, flowStates(t), render, map[string]string{
		"OrganizationID":     "the caller's own organization, which its token names",
		"Evidence.ACR":       "the eID's raw acr claim; the API gives the assurance level it maps to",
		"WithdrawnBy":        "the flow.withdrawn event and the withdrawal receipt say who withdrew",
		"ExpiringNotifiedAt": "the flow.expiring event tells the organization; consent.validUntil says when",
		"Person":             "the canonical form of data.nationalId, by which flowd compares people; the API shows the id as written",
	})
}

// flowStates are flows in the states that show different parts of a flow:
// open, accepted, withdrawn and expired.
func flowStates(t *testing.T) []flows.Flow {
	var fl fieldtest.Filler
	var full flows.Flow
	fl.Fill(t, &full, nil)
	at := func(h int) *time.Time { v := time.Date(2031, 5, 6, h, 0, 0, 0, time.UTC); return &v }
	open := full
	open.ProcessStatus, open.ConsentStatus = flows.Active, flows.Opened
	open.DecidedAt, open.WithdrawnAt, open.ExpiredAt = nil, nil, nil
	accepted := full
	accepted.ProcessStatus, accepted.ConsentStatus = flows.Completed, flows.Accepted
	accepted.DecidedAt, accepted.WithdrawnAt, accepted.ExpiredAt = at(1), nil, nil
	withdrawn := accepted
	withdrawn.ConsentStatus, withdrawn.WithdrawnAt = flows.Withdrawn, at(2)
	expired := accepted
	expired.ConsentStatus, expired.ExpiredAt = flows.Expired, at(3)
	return []flows.Flow{open, accepted, withdrawn, expired}
}
