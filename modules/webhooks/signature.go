package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// secretPrefix starts every signing secret, as Standard Webhooks libraries expect.
const secretPrefix = "whsec_"

// secretBytes is the size of a signing secret's key: 256 bits, as long as the
// HMAC-SHA256 block it keys needs to be strong.
const secretBytes = 32

// newSecret returns a fresh "whsec_<base64>" secret.
func newSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// secretKey returns the HMAC key of a "whsec_<base64>" secret.
func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) == 0 {
		return nil, errors.New("webhooks: malformed signing secret")
	}
	return key, nil
}

// Sign returns the Standard Webhooks v1 signature header value of body sent as
// message id at timestamp (Unix seconds): "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" for each secret, space-separated, in the order given.
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return "", err
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}
