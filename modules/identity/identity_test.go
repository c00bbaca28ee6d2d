package identity

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
)

func TestDerivePrefix(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"Demo Bank":                     "DB",
		"Acme":                          "ACME",
		"Nordea":                        "NORDEA",
		"Sparebank 1 Sør-Norge":         "S1S",
		"Handelsbanken":                 "HANDELSB",
		"x":                             "XOR",
		"Ærlig Øre":                     "AO",
		"Sør":                           "SOR",
		"The Very Long Name Of A Group": "TVLNOAG",
	}
	for name, want := range tests {
		if got := DerivePrefix(name); got != want {
			t.Errorf("DerivePrefix(%q) = %q, want %q", name, got, want)
		}
		if !prefixPattern.MatchString(DerivePrefix(name)) {
			t.Errorf("DerivePrefix(%q) = %q is not a valid prefix", name, DerivePrefix(name))
		}
	}
}

func TestNewOrganizationValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     NewOrganization
		fields string
	}{
		{"good", NewOrganization{Name: " Demo Bank ", RedirectOrigins: []string{"https://Bank.example/return?x=1"}}, ""},
		{"no name", NewOrganization{}, "name,referencePrefix"},
		{"long name", NewOrganization{Name: strings.Repeat("a", 201)}, "name"},
		{"bad prefix", NewOrganization{Name: "A", ReferencePrefix: "toolongprefix"}, "referencePrefix"},
		{"bad origin", NewOrganization{Name: "A B", RedirectOrigins: []string{"ftp://x"}}, "redirectOrigins"},
		{"a bidirectional override in the name", NewOrganization{Name: "Demo \u202Eknab"}, "name"},
		{"a zero-width space in the number", NewOrganization{Name: "Demo Bank", OrganizationNumber: "923\u200B609016"}, "organizationNumber"},
		{"an isolate in an origin", NewOrganization{Name: "Demo Bank", RedirectOrigins: []string{"https://bank\u2066.example"}}, "redirectOrigins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.Validate()
			var got []string
			if e, ok := apperr.As(err); ok {
				for _, f := range e.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != tt.fields {
				t.Fatalf("fields %v, want %q", got, tt.fields)
			}
		})
	}
	in := NewOrganization{Name: " Demo Bank ", RedirectOrigins: []string{"https://Bank.example/return?x=1"}}
	_ = in.Validate()
	if in.Name != "Demo Bank" || in.ReferencePrefix != "DB" || in.RedirectOrigins[0] != "https://bank.example" {
		t.Fatalf("normalized %+v", in)
	}
}

// TestNamesRefuseFormattingCharacters: the names staff read in the console
// (clients, staff accounts, an organization's settings) refuse the
// characters that reorder or hide text, as they refuse control characters.
func TestNamesRefuseFormattingCharacters(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"client name":  (&NewClient{OrganizationID: "o", Name: "Backend\u202Edne"}).Validate(),
		"staff name":   NewStaffAccount{OrganizationID: "o", Username: "kari", Name: "Kari\u200D", Role: RoleAdmin, Password: strings.Repeat("p", 12)}.Validate(),
		"settings":     (&OrganizationUpdate{ReferencePrefix: "DB", OrganizationNumber: "\uFEFF923609016"}).Validate(),
		"external id":  (&ExternalClient{Issuer: "https://idp.example", ClientID: "svc\u2067", OrganizationID: "o"}).Validate(),
		"jwks_uri":     (&ClientKeys{JWKSURI: "https://keys.bank.example/\u202Ejwks"}).Validate([]string{"keys.bank.example"}),
		"origin again": (&OrganizationUpdate{ReferencePrefix: "DB", RedirectOrigins: []string{"https://bank.example\u200F"}}).Validate(),
	} {
		e, ok := apperr.As(err)
		if !ok || len(e.Fields) != 1 || !strings.Contains(e.Fields[0].Message, "control or formatting characters") {
			t.Errorf("%s: %v, want one field refused for its formatting character", name, err)
		}
	}
}

func TestOrganizationSettingsAndClients(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	org, err := f.m.CreateOrganization(ctx, NewOrganization{Name: "Acme", OrganizationNumber: "123", ReferencePrefix: "acm",
		RedirectOrigins: []string{"https://acme.example/x"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.m.Organization(ctx, org.ID)
	if err != nil || got.ReferencePrefix != "ACM" || got.OrganizationNumber != "123" || strings.Join(got.RedirectOrigins, " ") != "https://acme.example" {
		t.Fatalf("organization %+v %v", got, err)
	}
	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
		if _, err := f.m.Organization(ctx, id); !errors.Is(err, ErrOrganizationNotFound) {
			t.Fatalf("Organization(%q): %v", id, err)
		}
	}
	if _, err := f.m.CreateClient(ctx, NewClient{OrganizationID: org.ID, Scopes: []string{"flows:admin"}}); apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("unknown scope: %v", err)
	}
	// Another organization cannot rotate or revoke this organization's client.
	if _, err := f.m.RevokeClient(ctx, org.ID, f.client.ID); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("revoke across organizations: %v", err)
	}
	if _, err := f.m.RotateClientSecret(ctx, org.ID, f.client.ID); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("rotate across organizations: %v", err)
	}
	clients, err := f.m.ListClients(ctx, f.org.ID)
	if err != nil || len(clients) != 1 || clients[0].ID != f.client.ID || clients[0].Revoked() {
		t.Fatalf("clients %+v %v", clients, err)
	}
}
