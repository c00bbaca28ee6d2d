package tokens

import "github.com/prometheus/client_golang/prometheus"

// refusal is why an access token was refused, as
// flowd_token_refusals_total labels it: a few words, never the token.
type refusal string

const (
	refusedMalformed    refusal = "malformed"           // empty, too long or not a JWT
	refusedIssuer       refusal = "unknown_issuer"      // neither flowd nor the external issuer
	refusedExpired      refusal = "expired"             // past its exp
	refusedVerification refusal = "verification_failed" // signature, issuer or audience
	refusedClaims       refusal = "claims"              // claims missing or malformed
	refusedKeyUntrusted refusal = "key_untrusted"       // signed by a key since retired
	refusedClient       refusal = "client"              // its client unknown or revoked
	refusedRevoked      refusal = "revoked"             // the token itself revoked
	refusedAudience     refusal = "audience"            // an external token for another audience
	refusedOrganization refusal = "organization"        // an external token of no known organization
	refusedDPoP         refusal = "dpop"                // the DPoP proof missing, invalid or replayed, or the wrong scheme
)

// newRefusals registers flowd_token_refusals_total on reg; with a nil reg
// it counts into a counter no one reads.
func newRefusals(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowd_token_refusals_total",
		Help: "Access tokens refused, by reason: malformed, unknown_issuer, expired, verification_failed, claims, key_untrusted, client, revoked, audience, organization, dpop.",
	}, []string{"reason"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}
