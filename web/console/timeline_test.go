package console

import (
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/modules/flows"
)

func TestATimelineTellsOfAWithdrawal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	decided, withdrawn := at.Add(time.Hour), at.Add(48*time.Hour)
	tests := []struct {
		name string
		f    flows.Flow
		want []string
	}{
		{"accepted", flows.Flow{CreatedAt: at, OpenedAt: &at, DecidedAt: &decided, ConsentStatus: flows.Accepted, ProcessStatus: flows.Completed},
			[]string{"Created", "Opened by the person", "Accepted", "Link would have expired"}},
		{"withdrawn", flows.Flow{CreatedAt: at, OpenedAt: &at, DecidedAt: &decided, WithdrawnAt: &withdrawn, ConsentStatus: flows.Withdrawn,
			ProcessStatus: flows.Completed}, []string{"Created", "Opened by the person", "Accepted", "Withdrawn", "Link would have expired"}},
	}
	for _, tt := range tests {
		steps := flowTimeline(tt.f, false, nil)
		var got []string
		for _, s := range steps {
			got = append(got, s.Label)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("%s: steps %v, want %v", tt.name, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("%s: steps %v, want %v", tt.name, got, tt.want)
			}
		}
		if tt.name == "withdrawn" && steps[3].At != Time(withdrawn) {
			t.Errorf("the withdrawal's time: %s", steps[3].At)
		}
	}
}

func TestATimelineTellsWhenAnAcceptanceExpires(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	decided, validUntil := at.Add(time.Hour), at.Add(90*24*time.Hour)
	tests := []struct {
		name string
		f    flows.Flow
		want []string
		at   []string // of the steps, when they matter
	}{
		{"accepted with a validity", flows.Flow{CreatedAt: at, OpenedAt: &at, DecidedAt: &decided, ConsentStatus: flows.Accepted,
			ProcessStatus: flows.Completed, Evidence: flows.Evidence{ValidUntil: &validUntil}},
			[]string{"Created", "Opened by the person", "Accepted", "Expires", "Link would have expired"},
			[]string{3: Time(validUntil)}},
		{"expired", flows.Flow{CreatedAt: at, OpenedAt: &at, DecidedAt: &decided, ExpiredAt: &validUntil, ConsentStatus: flows.Expired,
			ProcessStatus: flows.Completed, Evidence: flows.Evidence{ValidUntil: &validUntil}},
			[]string{"Created", "Opened by the person", "Accepted", "Expired", "Link would have expired"},
			[]string{2: Time(decided), 3: Time(validUntil)}},
		{"rejected, with a validity", flows.Flow{CreatedAt: at, OpenedAt: &at, DecidedAt: &decided, ConsentStatus: flows.Rejected,
			ProcessStatus: flows.Completed, Evidence: flows.Evidence{ValidUntil: &validUntil}},
			[]string{"Created", "Opened by the person", "Rejected", "Link would have expired"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := flowTimeline(tt.f, false, nil)
			var got []string
			for _, s := range steps {
				got = append(got, s.Label)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("steps %v, want %v", got, tt.want)
			}
			for i, want := range tt.at {
				if want != "" && steps[i].At != want {
					t.Errorf("step %s at %s, want %s", steps[i].Label, steps[i].At, want)
				}
			}
		})
	}
}
