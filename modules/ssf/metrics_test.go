package ssf_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/modules/ssf"
)

func TestStreamLagIsExported(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, func(o *ssf.Options) { o.Registry = reg })
	held, empty := b.pollStream(t), b.pollStream(t)
	// Both streams get the SET; disabling one drops it.
	b.revoke(t, "consent-1", 1)
	if _, err := b.m.SetStatus(t.Context(), holderOrg, empty.ID, ssf.Disabled, "not now"); err != nil {
		t.Fatal(err)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{} // metric → stream → value
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if got[f.GetName()] == nil {
				got[f.GetName()] = map[string]float64{}
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream_id" {
					got[f.GetName()][l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	pending, lag := got["flowd_ssf_stream_pending_sets"], got["flowd_ssf_stream_lag_seconds"]
	if pending[held.ID] != 1 || pending[empty.ID] != 0 || len(pending) != 2 {
		t.Errorf("pending SETs by stream %v, want 1 on %s and 0 on %s", pending, held.ID, empty.ID)
	}
	if lag[held.ID] <= 0 || lag[held.ID] > 60 || lag[empty.ID] != 0 || len(lag) != 2 {
		t.Errorf("lag by stream %v, want a few seconds at most on %s and 0 on %s", lag, held.ID, empty.ID)
	}
}
