package flows

import "github.com/prometheus/client_golang/prometheus"

// decisionsCounter registers flowd_consent_decisions_total, counted by
// outcome (DecisionAccepted, DecisionRejected, DecisionWithdrawn) as each
// decision or withdrawal is recorded.
func decisionsCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowd_consent_decisions_total",
		Help: "Consent decisions recorded, by outcome: accepted, rejected, withdrawn.",
	}, []string{"outcome"})
	reg.MustRegister(c)
	// Every outcome is a series from the start, so that a rate over it
	// does not begin with its first decision.
	for _, o := range []string{DecisionAccepted, DecisionRejected, DecisionWithdrawn} {
		c.WithLabelValues(o)
	}
	return c
}
