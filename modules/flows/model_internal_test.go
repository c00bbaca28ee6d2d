package flows

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/fieldtest"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// The row fields that no field of the domain shows as they are: the
// sealed personal data, opened into NationalID and LastName, who created
// the flow, kept for the record, the blind index that finds a person's
// flows and the subject key they are sealed under, which never leave the
// module.
var rowOnly = map[string]bool{"PIIKeyID": true, "NationalIDSealed": true, "NationalIDHMAC": true,
	"LastNameSealed": true, "CreatedBy": true, "PersonIndex": true, "PersonIndexKey": true,
	"SubjectKeyID": true, "SubjectKeySealed": true}

// renamed names the domain field of a row field whose name differs.
var renamed = map[string]string{"ConsentTextSHA256": "TextSHA256", "ConsentLanguage": "Language"}

// TestToFlowMapsEveryFieldOfTheRow: every field of a flow's row reaches
// the field of Flow of its name, and that one alone, and every field of
// Flow is made from the row, but the incidents and the consent link that
// Get adds. A field that toFlow forgot, in either type, fails here.
func TestToFlowMapsEveryFieldOfTheRow(t *testing.T) {
	t.Parallel()
	m := &Manager{sealer: testSealer(t), keys: newKeyCache()}
	var fill fieldtest.Filler
	var row store.Flow
	fill.Fill(t, &row, nil)
	sealRow(t, m.sealer, &row)
	f, err := m.toFlow(row)
	if err != nil {
		t.Fatal(err)
	}
	if f.NationalID != "01017012345" || f.LastName != "Nordmann" {
		t.Errorf("personal data opened as %q and %q", f.NationalID, f.LastName)
	}
	for _, field := range fieldtest.Fields(f) {
		if field.Value.IsZero() && field.Path != "Incidents" && field.Path != "ConsentURL" {
			t.Errorf("Flow.%s is zero: toFlow does not make it from the row", field.Path)
		}
	}
	checkEachFieldReaches(t, &fill, row, func(r store.Flow) (any, error) {
		sealRow(t, m.sealer, &r)
		return m.toFlow(r)
	})
}

// TestToSummaryMapsEveryFieldOfTheRow is the same for a list's rows.
func TestToSummaryMapsEveryFieldOfTheRow(t *testing.T) {
	t.Parallel()
	m := &Manager{sealer: testSealer(t), keys: newKeyCache()}
	var fill fieldtest.Filler
	var row store.FlowSummary
	fill.Fill(t, &row, nil)
	seal := func(r *store.FlowSummary) {
		key, keyRow := testSubjectKey(t, m.sealer, "org-a")
		r.PIIKeyID, r.SubjectKeyID, r.SubjectKeySealed = store.SubjectSealed, &keyRow.ID, keyRow.KeySealed
		r.NationalIDSealed = key.SealFlow(r.ID, "01017012345", "").NationalID
	}
	seal(&row)
	f, err := m.toSummary(row, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	if f.NationalID != "01017012345" || f.OrganizationID != "org-a" {
		t.Errorf("national id opened as %q, organization %q", f.NationalID, f.OrganizationID)
	}
	for _, field := range fieldtest.Fields(f) {
		if field.Value.IsZero() && field.Path != "Incidents" {
			t.Errorf("FlowSummary.%s is zero: toSummary does not make it from the row", field.Path)
		}
	}
	checkEachFieldReaches(t, &fill, row, func(r store.FlowSummary) (any, error) {
		seal(&r)
		return m.toSummary(r, "org-a")
	})
}

// checkEachFieldReaches changes each field of row in turn (but rowOnly's)
// and checks that what mapped makes of it changes in the field of the
// same name (or renamed's), and in no other.
func checkEachFieldReaches[R any](t *testing.T, fill *fieldtest.Filler, row R, mapped func(R) (any, error)) {
	t.Helper()
	before, err := mapped(row)
	if err != nil {
		t.Fatal(err)
	}
	for _, rf := range fieldtest.Fields(&row) {
		if rowOnly[rf.Path] {
			continue
		}
		changed := row
		fill.Change(t, fieldtest.Get(t, &changed, rf.Path))
		after, err := mapped(changed)
		if err != nil {
			t.Fatalf("with another %s: %v", rf.Path, err)
		}
		want := rf.Name
		if n, ok := renamed[rf.Name]; ok {
			want = n
		}
		var differ []string
		a := fieldtest.Fields(after)
		for i, f := range fieldtest.Fields(before) {
			if !fieldtest.Equal(f.Value, a[i].Value) {
				differ = append(differ, f.Path)
			}
		}
		if len(differ) != 1 || !strings.HasSuffix("."+differ[0], "."+want) {
			t.Errorf("the row's %s reaches %v of %T, want its %s alone", rf.Path, differ, before, want)
		}
	}
}

// sealRow seals personal data into row for its id under a new subject key
// of its organization, as a create does, and sets the key as a read reads
// it with the row.
func sealRow(t *testing.T, s *pii.Sealer, row *store.Flow) {
	key, keyRow := testSubjectKey(t, s, row.OrganizationID)
	row.PIIKeyID, row.SubjectKeyID, row.SubjectKeySealed = store.SubjectSealed, &keyRow.ID, keyRow.KeySealed
	sealed := key.SealFlow(row.ID, "01017012345", "Nordmann")
	row.NationalIDSealed, row.NationalIDHMAC, row.LastNameSealed = sealed.NationalID, sealed.NationalIDHMAC, sealed.LastName
}

// testSubjectKey is a new subject key of a person in organizationID.
func testSubjectKey(t *testing.T, s *pii.Sealer, organizationID string) (subjectkey.Key, store.SubjectKey) {
	t.Helper()
	key, row, err := subjectkey.New(s, nil, organizationID, "01017012345")
	if err != nil {
		t.Fatal(err)
	}
	return key, row
}

func testSealer(t *testing.T) *pii.Sealer {
	t.Helper()
	s, err := pii.New([]byte("model-test-data-key-of-32-bytes!"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
