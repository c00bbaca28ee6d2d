// Package secret makes the identity parts' random identifiers and secrets,
// and the MACs of client secrets. Secrets are stored only as argon2id
// hashes (internal/secrethash) and MACs.
package secret

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"strings"
)

// ID returns prefix followed by n random bytes in lower-case base32: easy to
// read aloud, select with a double click, and put in a URL.
func ID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// Random returns prefix followed by n random bytes, base64url without padding.
func Random(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
