package keys

import "github.com/prometheus/client_golang/prometheus"

// What a signature is for, as flowd_signatures_total labels it.
const (
	useAccessToken = "access_token"
	useIDToken     = "id_token"
	useReceipt     = "receipt"
)

// signatures counts the signatures made and those that failed, by use.
type signatures struct{ total *prometheus.CounterVec }

// newSignatures registers flowd_signatures_total on reg; with a nil reg it
// counts into a counter no one reads.
func newSignatures(reg prometheus.Registerer) signatures {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowd_signatures_total",
		Help: "Signatures by use (access_token, id_token, receipt) and outcome (signed, failed): receipts signed, and signing that failed.",
	}, []string{"use", "outcome"})
	if reg != nil {
		reg.MustRegister(c)
	}
	// Every series exists from the start, so that an alert on the rate of
	// failures sees a zero rather than nothing.
	for _, use := range []string{useAccessToken, useIDToken, useReceipt} {
		for _, outcome := range []string{"signed", "failed"} {
			c.WithLabelValues(use, outcome)
		}
	}
	return signatures{c}
}

// count counts one signature for use that ended in err.
func (s signatures) count(use string, err error) {
	outcome := "signed"
	if err != nil {
		outcome = "failed"
	}
	s.total.WithLabelValues(use, outcome).Inc()
}
