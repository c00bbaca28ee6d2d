package flows_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestEveryUpdateOfAFlowGrowsItsVersion reads the module's SQL: a flow's
// ETag names its version, so each statement that updates flows must grow
// version, or change only columns whose change the API does not show apart
// from one that does. Otherwise the ETag stays while the flow changes, and
// an If-Match read before the change would still hold.
func TestEveryUpdateOfAFlowGrowsItsVersion(t *testing.T) {
	t.Parallel()
	unseen := map[string]string{
		"event_sequence":       "the numbering of the flow's events, which the API does not show",
		"num_attachments":      "counted only in the transaction of a decision or withdrawal, which grows version",
		"pii_key_id":           "a re-seal under a new data key shows the same values",
		"national_id_sealed":   "a re-seal",
		"national_id_hmac":     "a re-seal",
		"last_name_sealed":     "a re-seal",
		"person_index":         "a re-index: no representation shows it",
		"person_index_key":     "a re-index",
		"subject_key_id":       "a rekey under the person's own key shows the same values",
		"expiring_notified_at": "when flow.expiring went out, which the API does not show",
	}
	statement := regexp.MustCompile(`(?is)update\s+flows\s+set\b(.*?)\bwhere\b`)
	column := regexp.MustCompile(`(?:^|,)\s*(\w+)\s*=`)
	files, err := filepath.Glob(filepath.Join("internal", "store", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the store's files: %v %v", files, err)
	}
	n := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range statement.FindAllSubmatch(src, -1) {
			n++
			var shown []string
			grows := false
			for _, c := range column.FindAllSubmatch(m[1], -1) {
				name := string(c[1])
				if name == "version" {
					grows = true
				} else if _, ok := unseen[name]; !ok {
					shown = append(shown, name)
				}
			}
			if !grows && len(shown) > 0 {
				t.Errorf("%s: an update of flows changes %v and leaves version:\n%s", file, shown, m[0])
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d updates of flows; the state, the expiry, the events' numbering, the receipts' count and the re-seal at least", n)
	}
}
