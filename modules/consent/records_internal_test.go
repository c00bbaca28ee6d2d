package consent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/modules/consent/record"
	"github.com/flowd/flowd/modules/flows"
)

// TestEveryStateOfAFlowMakesAValidRecord: a record made of a flow in each
// state it can be in follows the schema, ends in the DPV state the flow's
// consent is in, and never carries the national id or the last name.
func TestEveryStateOfAFlowMakesAValidRecord(t *testing.T) {
	t.Parallel()
	at := func(min int) *time.Time {
		v := time.Date(2026, 1, 2, 3, min, 0, 0, time.UTC)
		return &v
	}
	base := func() flows.Flow {
		return flows.Flow{ID: "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21", OrganizationID: "org-a", NationalID: "12345678901",
			Person: "12345678901", LastName: "Nordmann", FlowDefinitionID: "consent", FlowDefinitionVersion: 1,
			ConsentStatus: flows.Unopened, ProcessStatus: flows.Active, CreatedAt: *at(0), UpdatedAt: *at(0)}
	}
	decided := func(f flows.Flow, s flows.ConsentStatus) flows.Flow {
		f.OpenedAt, f.DecidedAt, f.ConsentStatus, f.ProcessStatus = at(1), at(2), s, flows.Completed
		f.Evidence = flows.Evidence{TextSHA256: make([]byte, 32), Language: "en", AssuranceLevel: "high", ACR: "loa-high", ValidUntil: at(59)}
		return f
	}
	for _, c := range []struct {
		name   string
		flow   func() flows.Flow
		status string
	}{
		{"unopened", base, record.Requested},
		{"opened", func() flows.Flow { f := base(); f.OpenedAt, f.ConsentStatus = at(1), flows.Opened; return f }, record.Requested},
		{"cancelled unanswered", func() flows.Flow { f := base(); f.ProcessStatus, f.UpdatedAt = flows.Cancelled, *at(5); return f }, record.Deferred},
		{"accepted", func() flows.Flow { return decided(base(), flows.Accepted) }, record.Given},
		{"rejected", func() flows.Flow { return decided(base(), flows.Rejected) }, record.Refused},
		{"withdrawn by the person", func() flows.Flow {
			f := decided(base(), flows.Withdrawn)
			f.WithdrawnAt, f.WithdrawnBy = at(3), flows.ByIndividual
			return f
		}, record.Withdrawn},
		{"withdrawn by the organization", func() flows.Flow {
			f := decided(base(), flows.Withdrawn)
			f.WithdrawnAt, f.WithdrawnBy = at(3), flows.ByOrganization
			return f
		}, record.Revoked},
		{"expired", func() flows.Flow { f := decided(base(), flows.Expired); f.ExpiredAt = at(59); return f }, record.Expired},
	} {
		v := Version{Title: Text{EN: "Share", NB: "Del"}, Purpose: Text{EN: "Why", NB: "Hvorfor"}, Recipient: "Demo Bank",
			DataCategories: []Text{{EN: "Income", NB: "Inntekt"}}, Validity: Validity{Days: 90}}
		rec := recordOf(c.flow(), v, recordFacts{orgName: "Demo Bank", subject: "c3ViamVjdA", withdrawURL: "https://flowd.example/my",
			withdrawAPI: "POST https://flowd.example/api/flows/x/withdraw", holders: []Resource{{URI: "https://api.tax.example/income", Name: "Income"}}})
		doc, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		kind, violations, err := record.Check(doc)
		if err != nil || kind != record.KindRecord || len(violations) != 0 {
			t.Errorf("%s: %s %v %v\n%s", c.name, kind, violations, err, doc)
		}
		if rec.ConsentStatus != c.status {
			t.Errorf("%s: consent_status %s, want %s", c.name, rec.ConsentStatus, c.status)
		}
		if strings.Contains(string(doc), "12345678901") || strings.Contains(string(doc), "Nordmann") {
			t.Errorf("%s: the record shows the person: %s", c.name, doc)
		}
	}
}
