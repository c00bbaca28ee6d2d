package flows_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/testkit/fieldtest"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
)

// laterFields are the fields of a flow that a create leaves zero: its
// decision's and its later changes'.
var laterFields = []string{"Evidence.", "OpenedAt", "DecidedAt", "WithdrawnAt", "WithdrawnBy", "ExpiredAt",
	"HasErrors", "NumAttachments", "NumUses", "LastUsedAt", "ExpiringNotifiedAt", "Incidents"}

// TestEveryFieldOfANewFlowIsStored creates a flow with every field of
// NewFlow given and checks that the flow then holds each in its field of
// the same name, and that every field but laterFields is set: a field that
// validation, normalization or the create's row forgot fails here.
func TestEveryFieldOfANewFlowIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b = instanceWith(b, settingsOrgs{})
	b.caller.Sandbox = true
	ctx := context.Background()
	// Version 1 of a definition whose latest version is 2, so that the
	// version asked for is the one stored.
	defs := consent.NewDefinitions(b.pool, orgs{})
	author := consent.Author{OrganizationID: b.caller.OrganizationID, By: "client-a"}
	draft := consent.Draft{Tag: "DOC-7", Title: consent.Text{EN: "Share your income", NB: "Del inntekten din"},
		Purpose:    consent.Text{EN: "We check your income.", NB: "Vi sjekker inntekten din."},
		Parameters: []consent.Parameter{{Name: "incomeYear", Label: consent.Text{EN: "Income year", NB: "Inntektsår"}}}}
	if _, err := defs.Create(ctx, author, "mortgage", draft); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Publish(ctx, author, "mortgage", draft); err != nil {
		t.Fatal(err)
	}
	in := flows.NewFlow{NationalID: "ID-42", LastName: "Nordmann", RedirectURL: "https://bank.example/done",
		WebhookURL: "https://hooks.example/flowd", ReferenceName: "Mortgage 42",
		FlowDefinitionID: "mortgage", FlowDefinitionVersion: 1, Parameters: map[string]string{"incomeYear": "2025"}}
	created, err := b.flows.Create(ctx, b.caller, in)
	if err != nil {
		t.Fatal(err)
	}
	f := b.get(t, created.FlowID)
	for _, field := range fieldtest.Fields(in) {
		if field.Value.IsZero() {
			t.Errorf("NewFlow.%s is not given here: give it a value this test can find again", field.Path)
			continue
		}
		var stored fieldtest.Field
		for _, s := range fieldtest.Fields(f) {
			if s.Path == field.Path {
				stored = s
			}
		}
		if !stored.Value.IsValid() {
			t.Errorf("NewFlow.%s has no field of its name in Flow", field.Path)
		} else if !fieldtest.Equal(stored.Value, field.Value) {
			t.Errorf("Flow.%s = %v after a create that asked for %v", field.Path, stored.Value, field.Value)
		}
	}
	for _, field := range fieldtest.Fields(f) {
		later := false
		for _, p := range laterFields {
			later = later || strings.HasPrefix(field.Path, p)
		}
		if field.Value.IsZero() && !later {
			t.Errorf("Flow.%s is zero after a create", field.Path)
		}
	}
}

// instanceWith is b's module with the organizations' settings of o.
func instanceWith(b *bundle, o flows.Organizations) *bundle {
	definitions := consent.NewDefinitions(b.pool, orgs{})
	c := *b
	c.flows = flows.New(b.pool, b.sealer, consent.NewRequests(b.pool, b.sealer, "https://flowd.example"),
		definitions, o, tableEvents{},
		slog.New(slog.NewJSONHandler(b.logs, nil)), prometheus.NewRegistry(), flows.Config{})
	return &c
}

// settingsOrgs gives every organization every setting of its flows.
type settingsOrgs struct{ orgs }

func (settingsOrgs) FlowSettings(context.Context, string) (flows.OrganizationSettings, error) {
	return flows.OrganizationSettings{ReferencePrefix: "MORT", OrganizationNumber: "923609016"}, nil
}
