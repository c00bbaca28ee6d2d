package erasure_test

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/erasure"
)

// goodLine is one tombstone as an export writes it.
const goodLine = `{"erasureId":"01a21ed5-1051-70df-a71d-1aca9ec18d05","organizationId":"org-a","subject":"c3ViamVjdA",` +
	`"subjectKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","flowCount":2,"keepReceipts":false,` +
	`"keyDestroyedAt":"2026-01-02T03:04:05Z","erasedBy":"client:a","erasedAt":"2026-01-02T03:04:05Z","receipt":"a.b.c"}`

// TestReadingAnExportRefusesItWholeForOneBadLine: an export reads line by
// line, blank lines skipped; any line that is not a tombstone refuses the
// whole file, naming the line, so that reapply changes nothing.
func TestReadingAnExportRefusesItWholeForOneBadLine(t *testing.T) {
	t.Parallel()
	got, err := erasure.ReadTombstones(strings.NewReader(goodLine + "\n\n" + goodLine + "\n"))
	if err != nil || len(got) != 2 || got[0].FlowCount != 2 || got[1].OrganizationID != "org-a" {
		t.Fatalf("a good export: %+v, %v", got, err)
	}
	for _, c := range []struct{ name, line string }{
		{"not JSON", `erasure`},
		{"an unknown member", strings.Replace(goodLine, `"flowCount"`, `"flows":1,"flowCount"`, 1)},
		{"a bad erasure id", strings.Replace(goodLine, `01a21ed5-1051-70df-a71d-1aca9ec18d05`, `nope`, 1)},
		{"a short subject key", strings.Replace(goodLine, `AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`, `AAAA`, 1)},
		{"no organization", strings.Replace(goodLine, `"organizationId":"org-a"`, `"organizationId":""`, 1)},
		{"a negative count", strings.Replace(goodLine, `"flowCount":2`, `"flowCount":-1`, 1)},
		{"no receipt", strings.Replace(goodLine, `"receipt":"a.b.c"`, `"receipt":""`, 1)},
	} {
		got, err := erasure.ReadTombstones(strings.NewReader(goodLine + "\n" + c.line + "\n"))
		if err == nil || got != nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v, %+v; want the file refused at line 2", c.name, err, got)
		}
	}
}
