package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestDuplicateMembersAreRefused: a body that gives a member twice in one
// object says two things (encoding/json keeps the last, a proxy in front may
// read the first), so it is a 400 naming the member, nested ones by their
// path, and nothing is stored.
func TestDuplicateMembersAreRefused(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	const rest = `"lastName":"Nordmann","redirectUrl":"https://bank.example/done"`
	for _, tt := range []struct {
		name, path, body string
		want             map[string]string // field → a part of its message
	}{
		{"a national id given twice", "/api/flows", `{"nationalId":"ID-11111",` + rest + `,"nationalId":"ID-99999"}`,
			map[string]string{"nationalId": "is given more than once"}},
		{"but for case", "/api/flows", `{"nationalId":"ID-11111",` + rest + `,"NationalId":"ID-99999"}`,
			map[string]string{"NationalId": `"nationalId" comes before it`}},
		{"written with an escape", "/api/flows", `{"nationalId":"ID-11111",` + rest + `,"national\u0049d":"ID-99999"}`,
			map[string]string{"nationalId": "is given more than once"}},
		{"with other problems", "/api/flows", `{"nationalId":"ID-1","nationalId":"ID-2","lastName":"","redirectUrl":"https://bank.example/done"}`,
			map[string]string{"nationalId": "more than once", "lastName": "required"}},
		{"in a definition's title", "/api/flow-definitions",
			strings.Replace(draftBody(map[string]any{"id": "twice"}), `"nb":"Del inntekten din"`, `"nb":"Del inntekten din","en":"Something else"`, 1),
			map[string]string{"title.en": "is given more than once"}},
		{"in a data category", "/api/flow-definitions",
			strings.Replace(draftBody(map[string]any{"id": "twice"}), `{"en":"Income","nb":"Inntekt"}`, `{"en":"Income","nb":"Inntekt","NB":"Gjeld"}`, 1),
			map[string]string{"dataCategories[0].NB": `"nb" comes before it`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Call(t, "POST", tt.path, webtest.TokA, tt.body)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.Status, r.Body)
			}
			var p httpkit.Problem
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, fe := range p.Errors {
				got[fe.Field] = fe.Message
			}
			for field, msg := range tt.want {
				if !strings.Contains(got[field], msg) {
					t.Errorf("field %s: %q, want it to say %q (%s)", field, got[field], msg, r.Body)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("fields %v, want only %v", got, tt.want)
			}
		})
	}
	if n := e.Count(t, `select count(*) from flows`); n != 0 {
		t.Fatalf("%d flows stored from refused bodies", n)
	}
	if n := e.Count(t, `select count(*) from consent_definition_versions where definition_id <> 'consent'`); n != 0 {
		t.Fatalf("%d definition versions stored from refused bodies", n)
	}
}
