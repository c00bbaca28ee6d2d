package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/modules/flows"
)

// TestEveryFieldOfACreateCounts: a create's request is compared as the
// normalized NewFlow it asks for, so a member of the body that the create
// reads and the comparison forgot would let another create replay. Each
// member of createFlowRequest is set in turn, by reflection, and must change
// what is compared.
func TestEveryFieldOfACreateCounts(t *testing.T) {
	t.Parallel()
	compared := func(req createFlowRequest) string {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		_, canonical, ok := createRequest(body)
		if !ok {
			t.Fatalf("%s is no create", body)
		}
		return string(canonical)
	}
	base := compared(createFlowRequest{})
	fields := reflect.TypeFor[createFlowRequest]()
	for i := range fields.NumField() {
		field := fields.Field(i)
		t.Run(field.Name, func(t *testing.T) {
			var req createFlowRequest
			switch v := reflect.ValueOf(&req).Elem().Field(i); field.Type.Kind() {
			case reflect.String:
				v.SetString("value")
			case reflect.Int:
				v.SetInt(7)
			case reflect.Map:
				v.Set(reflect.ValueOf(map[string]string{"name": "value"}))
			default:
				t.Fatalf("createFlowRequest.%s is a %s: teach this test about it", field.Name, field.Type)
			}
			if compared(req) == base {
				t.Errorf("createFlowRequest.%s does not count in the compared request", field.Name)
			}
		})
	}
	if n, m := reflect.TypeFor[createFlowRequest]().NumField(), reflect.TypeFor[flows.NewFlow]().NumField(); n != m {
		t.Errorf("createFlowRequest has %d fields, NewFlow %d: newFlow forgets one", n, m)
	}
}

// TestACarriedCreatesFingerprintIsTheFlowsModules: the text a carried key's
// hash is checked against is, for every kind of create, the flows module's
// request key as it was written (its definition and parameters only when
// given), or a carried key would never replay.
func TestACarriedCreatesFingerprintIsTheFlowsModules(t *testing.T) {
	t.Parallel()
	r := idempotency.Request{ClientID: "client-a"}
	for _, c := range []struct {
		cc   carriedCreate
		want string
	}{
		{carriedCreate{in: flows.NewFlow{NationalID: "ID-1", LastName: "N", RedirectURL: "https://bank.example/"}},
			`"client-a","false","ID-1","N","https://bank.example/","",""`},
		{carriedCreate{sandbox: true, in: flows.NewFlow{NationalID: "ID-1", LastName: "N", RedirectURL: "https://bank.example/",
			WebhookURL: "https://hooks.example/", ReferenceName: `Loan "7"`, FlowDefinitionID: "income", FlowDefinitionVersion: 2,
			Parameters: map[string]string{"b": "2", "a": "1"}}},
			`"client-a","true","ID-1","N","https://bank.example/","https://hooks.example/","Loan \"7\"","income","2",` +
				`"parameter:a","1","parameter:b","2"`},
		{carriedCreate{in: flows.NewFlow{NationalID: "ID-1", FlowDefinitionVersion: 3}},
			`"client-a","false","ID-1","","","","","","3"`},
	} {
		if got, ok := c.cc.Fingerprint(r); !ok || got != c.want {
			t.Errorf("Fingerprint(%+v) = %s, want %s", c.cc, got, c.want)
		}
	}
}
