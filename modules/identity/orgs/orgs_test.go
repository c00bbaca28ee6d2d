package orgs

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/staff"
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
		"staff name":   staff.NewAccount{OrganizationID: "o", Username: "kari", Name: "Kari\u200D", Role: staff.RoleAdmin, Password: strings.Repeat("p", 12)}.Validate(),
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
	f := newFixture(t)
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

// fixture is what each test of this package starts from: the organizations
// and clients of a fresh database, with one organization and one client.
type fixture struct {
	m      *Service
	org    Organization
	client ClientCredentials
}

// noGrants stands in for the token service's Grants: these tests issue no tokens.
type noGrants struct{}

func (noGrants) RevokeClientGrantsTx(context.Context, database.Tx, string) error { return nil }

func newFixture(t testing.TB) fixture {
	t.Helper()
	pool := dbtest.New(t)
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	m, err := New(pool, changes.NewFeed(pool, nil), noGrants{}, Config{KeyEncryptionKey: kek, HashParams: secrethash.Cheap})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	org, err := m.CreateOrganization(ctx, NewOrganization{Name: "Test Bank"})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := m.CreateClient(ctx, NewClient{OrganizationID: org.ID, Scopes: []string{identity.ScopeFlowsRead, identity.ScopeFlowsWrite}})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{m: m, org: org, client: cc}
}

func TestUpdateOrganization(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		in     OrganizationUpdate
		fields string
		want   Organization
	}{
		{"normalized", OrganizationUpdate{ReferencePrefix: " tb2 ", OrganizationNumber: " 123 ",
			RedirectOrigins: []string{"https://Bank.example/", "", "https://bank.example", "http://localhost:8080"}}, "",
			Organization{ReferencePrefix: "TB2", OrganizationNumber: "123", RedirectOrigins: []string{"https://bank.example", "http://localhost:8080"}}},
		{"cleared allow-list", OrganizationUpdate{ReferencePrefix: "TB"}, "", Organization{ReferencePrefix: "TB", RedirectOrigins: []string{}}},
		{"bad prefix", OrganizationUpdate{ReferencePrefix: "a-b"}, "referencePrefix", Organization{}},
		{"long number", OrganizationUpdate{ReferencePrefix: "TB", OrganizationNumber: strings.Repeat("1", 65)}, "organizationNumber", Organization{}},
		{"origin with a path", OrganizationUpdate{ReferencePrefix: "TB", RedirectOrigins: []string{"https://bank.example/return"}}, "redirectOrigins", Organization{}},
		{"not a URL", OrganizationUpdate{ReferencePrefix: "TB", RedirectOrigins: []string{"bank.example", "ftp://x"}}, "redirectOrigins,redirectOrigins", Organization{}},
		{"user info", OrganizationUpdate{ReferencePrefix: "TB", RedirectOrigins: []string{"https://u:p@bank.example"}}, "redirectOrigins", Organization{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := f.m.Organization(ctx, f.org.ID)
			tt.in.ID = f.org.ID
			got, err := f.m.UpdateOrganization(ctx, tt.in)
			var fields []string
			if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
				for _, fe := range e.Fields {
					fields = append(fields, fe.Field)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(fields, ",") != tt.fields {
				t.Fatalf("fields %v, want %q", fields, tt.fields)
			}
			stored, _ := f.m.Organization(ctx, f.org.ID)
			if tt.fields != "" {
				if !slices.Equal(stored.RedirectOrigins, before.RedirectOrigins) || stored.ReferencePrefix != before.ReferencePrefix {
					t.Fatalf("a refused update changed the organization: %+v", stored)
				}
				return
			}
			if got.ReferencePrefix != tt.want.ReferencePrefix || got.OrganizationNumber != tt.want.OrganizationNumber ||
				!slices.Equal(got.RedirectOrigins, tt.want.RedirectOrigins) || got.Name != "Test Bank" {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if stored.ReferencePrefix != got.ReferencePrefix || !slices.Equal(stored.RedirectOrigins, got.RedirectOrigins) {
				t.Fatalf("stored %+v, returned %+v", stored, got)
			}
		})
	}
	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
		if _, err := f.m.UpdateOrganization(ctx, OrganizationUpdate{ID: id, ReferencePrefix: "TB"}); !errors.Is(err, ErrOrganizationNotFound) {
			t.Errorf("update of %q: %v", id, err)
		}
	}
}

// TestUpdateOrganizationShowsItsHookWhatItReplaced: the hook sees the
// settings the update replaced as read in its own transaction, so of two
// admins saving one after the other, the second entry starts from the
// first one's result and not from a page loaded before it.
func TestUpdateOrganizationShowsItsHookWhatItReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	org := f.org.ID
	var changes []OrganizationChange
	record := func(ctx context.Context, tx database.Tx, ch OrganizationChange) error {
		changes = append(changes, ch)
		return nil
	}
	for _, prefix := range []string{"FIRST", "SECOND"} {
		if _, err := f.m.UpdateOrganization(ctx, OrganizationUpdate{ID: org, ReferencePrefix: prefix}, record); err != nil {
			t.Fatal(err)
		}
	}
	if len(changes) != 2 {
		t.Fatalf("the hook ran %d times, want 2", len(changes))
	}
	if got := changes[0].Before.ReferencePrefix; got != f.org.ReferencePrefix {
		t.Errorf("first update: before %q, want the seeded %q", got, f.org.ReferencePrefix)
	}
	if got := changes[1].Before.ReferencePrefix; got != "FIRST" {
		t.Errorf("second update: before %q, want FIRST", got)
	}
	if got := changes[1].After.ReferencePrefix; got != "SECOND" {
		t.Errorf("second update: after %q, want SECOND", got)
	}
}
