package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/fieldtest"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/views/pages"
)

// TestTheFlowPageShowsEveryFieldOfAFlow: each field of flows.Flow shows on
// the console's flow page (flowDetailOf), or is named here with why not, so
// that a field added to the flow and forgotten by the console fails here.
func TestTheFlowPageShowsEveryFieldOfAFlow(t *testing.T) {
	t.Parallel()
	render := func(f flows.Flow) string {
		var b strings.Builder
		if err := pages.FlowDetail(flowDetailOf(f, "/console/flows/"+f.ID, true, false, nil)).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	fieldtest.Reaches(t, flowStates(t), render, map[string]string{
		"OrganizationID": "the staff member's own organization: the frame names it",
		"Evidence.ACR":   "the eID's raw acr claim; the page shows the assurance level it maps to",
		"NumAttachments": "the receipts are listed from the flow's attachments instead",
		"WithdrawnBy":    "the audit log says who withdrew",
		"Person":         "the canonical form of the national id, by which flowd compares people: the page shows the id masked as written",
	})
}

// flowStates are flows in the states that show different parts of a flow:
// open, accepted, withdrawn, expired and cancelled.
func flowStates(t *testing.T) []flows.Flow {
	var fl fieldtest.Filler
	var full flows.Flow
	fl.Fill(t, &full, map[string]any{"Evidence.Language": "nb"})
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
	cancelled := open
	cancelled.ProcessStatus = flows.Cancelled
	return []flows.Flow{open, accepted, withdrawn, expired, cancelled}
}
