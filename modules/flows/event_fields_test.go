package flows

import (
	"fmt"
	"testing"

	"github.com/flowd/flowd/internal/testkit/fieldtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// TestAFlowsEventCarriesWhatItShould: an event's data (eventOf) carries the
// flow's ids and states and nothing personal; each other field of Flow is
// named here with why it stays out, so that a field added to the flow is
// either in its events or left out on purpose.
func TestAFlowsEventCarriesWhatItShould(t *testing.T) {
	t.Parallel()
	var fl fieldtest.Filler
	var f Flow
	fl.Fill(t, &f, nil)
	render := func(f Flow) string { return fmt.Sprintf("%+v", eventOf(f, webhooks.FlowCreated, "task-1")) }
	const fetch = "the receiver reads the flow (GET /api/flows/:id) for the rest"
	const personal = "personal data: events carry none"
	fieldtest.Reaches(t, []Flow{f}, render, map[string]string{
		"Number": fetch, "ReferenceName": fetch, "Sandbox": fetch, "NationalID": personal, "Person": personal, "LastName": personal,
		"RedirectURL": fetch, "OrganizationNumber": fetch, "ProcessInstanceID": fetch,
		"VersionTag": fetch, "Parameters": fetch,
		"Evidence.TextSHA256": fetch, "Evidence.Language": fetch, "Evidence.AssuranceLevel": fetch, "Evidence.ACR": fetch,
		"Evidence.ValidUntil": fetch, "CreatedAt": fetch, "OpenedAt": fetch, "DecidedAt": fetch, "WithdrawnAt": fetch,
		"ExpiredAt": fetch, "ExpiresAt": fetch, "HasErrors": fetch, "NumAttachments": fetch,
		"Incidents": fetch, "NumUses": fetch, "LastUsedAt": fetch, "ExpiringNotifiedAt": fetch, "ConsentURL": "the person's link: only the API's caller gets it",
	})
}
