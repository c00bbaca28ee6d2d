package api

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// encodeLikeWriteJSON is what writeJSONType wrote before bodies appended
// their own JSON: the reference every appender must match byte for byte.
func encodeLikeWriteJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tricky are strings that encoding/json escapes in every way it knows.
var tricky = []string{
	"", "plain", "REF-123", `quote " and \ backslash`, "<script>&</script>", "tab\tnew\nline\rcr",
	"\x00\x01\x1f\x7f", "\b\f", "æøå Åse", "emoji 🙂", "\u2028\u2029", "bad \xff utf-8 \xc3", "\xed\xa0\x80",
}

func TestFlowListAppendsWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	var items []flowListItem
	for i, s := range tricky {
		items = append(items, flowListItem{
			ID: s, NationalID: s, OrganizationID: "org-" + s, Status: s, ReferenceID: s, FlowDefinitionID: s,
			FlowNumber: int64(i) - 3, Sandbox: i%2 == 0, Archived: i%3 == 0,
			CreatedAt: apiInstant(at.Add(time.Duration(i) * time.Hour)), UpdatedAt: apiInstant(at),
		})
	}
	items = append(items, flowListItem{FlowNumber: math.MaxInt64}, flowListItem{FlowNumber: math.MinInt64,
		CreatedAt: apiInstant(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)), UpdatedAt: apiInstant(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))})
	tests := []struct {
		name string
		list flowList
	}{
		{"nil data", flowList{}},
		{"empty data", flowList{HasMore: true, Data: []flowListItem{}}},
		{"one", flowList{Data: items[:1]}},
		{"every tricky string", flowList{HasMore: true, Data: items}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := encodeLikeWriteJSON(t, tt.list)
			if got := tt.list.AppendJSON(nil); !bytes.Equal(got, want) {
				t.Fatalf("AppendJSON wrote\n%s\nencoding/json writes\n%s", got, want)
			}
			prefix := []byte("kept")
			if got := tt.list.AppendJSON(prefix); !bytes.Equal(got, append([]byte("kept"), want...)) {
				t.Fatalf("AppendJSON did not append to what it was given: %s", got)
			}
		})
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}
