package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/web/openapi/flowdapi"
)

// TestAGeneratedClientDrivesTheAPI drives flowd with the Go client that
// oapi-codegen generated from the served document (web/openapi/flowdapi): the
// document's types must decode what the service answers, and the webhook
// payload's schema what the events API lists.
func TestAGeneratedClientDrivesTheAPI(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	acme, hc := createOrgAndClient(t, in, "Acme Bank", "ACME")
	api, err := flowdapi.NewClientWithResponses(in.URL, flowdapi.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	key := "generated-client-1"
	created, err := api.CreateFlowWithResponse(ctx, &flowdapi.CreateFlowParams{IdempotencyKey: &key}, flowdapi.NewFlow{
		NationalId: "12345678901", LastName: "Nordmann", RedirectUrl: "https://bank.example/done",
	})
	if err != nil {
		t.Fatal(err)
	}
	if created.StatusCode() != http.StatusCreated || created.JSON201 == nil || created.JSON201.ReferenceId != "ACME-1" {
		t.Fatalf("create: %d %s", created.StatusCode(), created.Body)
	}
	id := created.JSON201.FlowId

	got, err := api.GetFlowWithResponse(ctx, id.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != http.StatusOK || got.JSON200 == nil {
		t.Fatalf("retrieve: %d %s", got.StatusCode(), got.Body)
	}
	if f := got.JSON200.Flow; f.FlowId != id || f.Status != flowdapi.Active || f.Consent.Status != flowdapi.Unopened ||
		f.Data.NationalId != "12345678901" || f.Data.OrganizationNumber != "987654321" {
		t.Fatalf("retrieve: %s", got.Body)
	}

	list, err := api.ListFlowsWithResponse(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if list.StatusCode() != http.StatusOK || list.JSON200 == nil || len(list.JSON200.Data) != 1 ||
		list.JSON200.Data[0].Id != id || list.JSON200.Data[0].OrganizationId != acme.ID {
		t.Fatalf("list: %d %s", list.StatusCode(), list.Body)
	}

	events, err := api.ListEventsWithResponse(ctx, &flowdapi.ListEventsParams{FlowId: &id})
	if err != nil {
		t.Fatal(err)
	}
	if events.StatusCode() != http.StatusOK || events.JSON200 == nil || len(events.JSON200.Data) != 1 {
		t.Fatalf("events: %d %s", events.StatusCode(), events.Body)
	}
	data, err := events.JSON200.Data[0].Data.AsFlowEventData()
	if err != nil || data.FlowId != id || data.Status != flowdapi.Unopened || data.Sequence == nil || *data.Sequence != 1 {
		t.Fatalf("flow.created data %+v (%v): %s", data, err, events.Body)
	}
}
