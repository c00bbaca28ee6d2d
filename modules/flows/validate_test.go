package flows

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/nationalid"
)

func TestNewFlowValidation(t *testing.T) {
	t.Parallel()
	ok := NewFlow{NationalID: "ID-1", LastName: "Nordmann", RedirectURL: "https://bank.example/cb"}
	tests := []struct {
		name   string
		change func(*NewFlow)
		rules  Rules
		fields string
	}{
		{"valid", func(*NewFlow) {}, Rules{}, ""},
		{"missing", func(f *NewFlow) { *f = NewFlow{} }, Rules{}, "nationalId,lastName,redirectUrl"},
		{"http elsewhere", func(f *NewFlow) { f.RedirectURL = "http://bank.example/" }, Rules{}, "redirectUrl"},
		{"http elsewhere, insecure allowed", func(f *NewFlow) { f.RedirectURL = "http://bank.example/" }, Rules{AllowInsecureURLs: true}, ""},
		{"http on localhost", func(f *NewFlow) { f.RedirectURL = "http://localhost:8080/cb" }, Rules{}, ""},
		{"http on ::1", func(f *NewFlow) { f.WebhookURL = "http://[::1]:9000/h" }, Rules{}, ""},
		{"http on 127.1.2.3", func(f *NewFlow) { f.WebhookURL = "http://127.1.2.3/h" }, Rules{}, ""},
		{"no host", func(f *NewFlow) { f.RedirectURL = "https:///path" }, Rules{}, "redirectUrl"},
		{"space", func(f *NewFlow) { f.RedirectURL = "https://bank.example/a b" }, Rules{}, "redirectUrl"},
		{"user info", func(f *NewFlow) { f.WebhookURL = "https://user@hooks.example/" }, Rules{}, "webhookUrl"},
		{"mailto", func(f *NewFlow) { f.RedirectURL = "mailto:a@b.example" }, Rules{}, "redirectUrl"},
		{"allow-listed", func(f *NewFlow) {}, Rules{RedirectOrigins: []string{"https://other.example", "https://BANK.example:443"}}, ""},
		{"not allow-listed", func(f *NewFlow) {}, Rules{RedirectOrigins: []string{"https://bank.example:8443"}}, "redirectUrl"},
		{"allow-list does not bind webhooks", func(f *NewFlow) { f.WebhookURL = "https://hooks.example/" }, Rules{RedirectOrigins: []string{"https://bank.example"}}, ""},
		{"200 characters", func(f *NewFlow) { f.LastName = strings.Repeat("ø", 200) }, Rules{}, ""},
		{"201 characters", func(f *NewFlow) { f.LastName = strings.Repeat("ø", 201) }, Rules{}, "lastName"},
		{"newline", func(f *NewFlow) { f.ReferenceName = "a\nb" }, Rules{}, "referenceName"},
		{"national id by format", func(f *NewFlow) { f.NationalID = "ID-1" }, Rules{NationalIDs: nationalid.MustNew(nationalid.FormatSweden, nil)}, "nationalId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ok
			tt.change(&in)
			err := in.Normalize().Validate(tt.rules)
			var got []string
			if e, isApp := apperr.As(err); isApp {
				for _, f := range e.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != tt.fields {
				t.Fatalf("fields %v, want %q (%v)", got, tt.fields, err)
			}
		})
	}
}

func TestListParamsCheck(t *testing.T) {
	t.Parallel()
	p := ListParams{}
	if err := p.Check(); err != nil || p.Limit != DefaultLimit {
		t.Fatalf("defaults: %v %d", err, p.Limit)
	}
	p = ListParams{Limit: 101, Status: "active", StartingAfter: "x", EndingBefore: "y"}
	e, _ := apperr.As(p.Check())
	var got []string
	for _, f := range e.Fields {
		got = append(got, f.Field)
	}
	if strings.Join(got, ",") != "limit,status,ending_before,starting_after,ending_before" {
		t.Fatalf("fields %v", got)
	}
}

// TestListParamsRefuseReferencesPostgreSQLWouldNot: a reference search that
// PostgreSQL would refuse is refused before it is queued in a round trip
// other reads may share.
func TestListParamsRefuseReferencesPostgreSQLWouldNot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ref string
		ok  bool
	}{
		{"DEMO-12", true},
		{"ÅSE-1", true},
		{strings.Repeat("A", 100), true},
		{strings.Repeat("A", 101), false},
		{"DEMO\x00-1", false},
		{"DEMO-\xff", false},
	} {
		p := ListParams{ReferenceID: tt.ref}
		err := p.Check()
		if tt.ok != (err == nil) {
			t.Errorf("reference %q: %v, want ok %v", tt.ref, err, tt.ok)
		}
		if e, _ := apperr.As(err); err != nil && (len(e.Fields) != 1 || e.Fields[0].Field != "referenceId") {
			t.Errorf("reference %q: %v, want one referenceId problem", tt.ref, err)
		}
	}
}
