package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
)

func TestUpdateOrganization(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
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

func TestAuditLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	for i := range 5 {
		if err := f.m.RecordAudit(ctx, AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: AuditFlowDelete,
			Target: fmt.Sprintf("TB-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.m.RecordAudit(ctx, AuditEntry{OrganizationID: "another-org", Actor: "staff:oscar", Action: AuditClientCreate}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []AuditEntry{
		{Actor: "staff:ada", Action: AuditFlowDelete},
		{OrganizationID: f.org.ID, Action: AuditFlowDelete},
		{OrganizationID: f.org.ID, Actor: "staff:ada", Action: "Drop Table"},
		{OrganizationID: f.org.ID, Actor: "staff:ada", Action: AuditFlowDelete, Detail: strings.Repeat("x", 501)},
	} {
		if err := f.m.RecordAudit(ctx, bad); apperr.CodeOf(err) != apperr.Invalid {
			t.Errorf("RecordAudit(%+v) = %v, want Invalid", bad, err)
		}
	}

	page, more, err := f.m.AuditLog(ctx, f.org.ID, 3, 0)
	if err != nil || !more || len(page) != 3 || page[0].Target != "TB-4" || page[2].Target != "TB-2" || page[0].Actor != "staff:ada" {
		t.Fatalf("first page: %+v more=%v err=%v", page, more, err)
	}
	rest, more, err := f.m.AuditLog(ctx, f.org.ID, 3, page[2].ID)
	if err != nil || more || len(rest) != 2 || rest[0].Target != "TB-1" || rest[1].Target != "TB-0" {
		t.Fatalf("second page: %+v more=%v err=%v", rest, more, err)
	}
	other, _, err := f.m.AuditLog(ctx, "another-org", 10, 0)
	if err != nil || len(other) != 1 || other[0].Actor != "staff:oscar" {
		t.Fatalf("another organization's log: %+v %v", other, err)
	}
}
