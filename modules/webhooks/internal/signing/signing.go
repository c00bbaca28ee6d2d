// Package signing holds the webhooks' signing secrets: their form, their
// sealing at rest, and the Standard Webhooks signature they make.
package signing

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// secretPrefix starts every signing secret, as Standard Webhooks libraries expect.
const secretPrefix = "whsec_"

// secretBytes is the size of a signing secret's key: 256 bits, as long as the
// HMAC-SHA256 block it keys needs to be strong.
const secretBytes = 32

// errMalformedSecret is a stored signing secret that is not "whsec_<base64>".
var errMalformedSecret = errors.New("webhooks: malformed signing secret")

// NewSecret returns a fresh "whsec_<base64>" secret.
func NewSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Sign returns the webhook-signature header of body sent as message id at
// timestamp (Unix seconds): the Standard Webhooks library's v1 signature for
// each secret, space-separated, in the order given. During a rotation the
// current and the previous secret both sign, so a receiver holding either
// verifies the delivery.
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		// The library takes an empty key; a secret without one is a broken row.
		if strings.TrimPrefix(s, secretPrefix) == "" {
			return "", errMalformedSecret
		}
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", errMalformedSecret
		}
		sig, err := wh.Sign(id, time.Unix(timestamp, 0), body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// Overlap is how long a rotated-out secret or key pair keeps signing, and
// how long after an endpoint's signing changes both signatures are sent.
const Overlap = 24 * time.Hour

// Schemes says which signatures a delivery carries at now: its endpoint's
// own (signing, "symmetric" or "asymmetric"; empty is symmetric), and,
// within Overlap after it changed (changedAt), the other one too.
func Schemes(signing string, changedAt *time.Time, now time.Time) (symmetric, asymmetric bool) {
	asymmetric = signing == "asymmetric"
	symmetric = !asymmetric
	if changedAt != nil && now.Sub(*changedAt) < Overlap {
		return true, true
	}
	return symmetric, asymmetric
}
