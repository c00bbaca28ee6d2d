// Package secret makes client secrets and keeps them only as argon2id hashes
// in the PHC string format, which records the parameters each hash was made
// with so that they can change without invalidating stored hashes.
package secret

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32
	Threads uint8
}

// DefaultParams are OWASP's recommendation for argon2id (19 MiB, 2 passes,
// 1 lane): a hash costs tens of milliseconds and 19 MiB, so that a stolen
// database does not give up secrets cheaply while the token endpoint stays
// affordable under load.
var DefaultParams = Params{Memory: 19 * 1024, Time: 2, Threads: 1}

const saltLen, keyLen = 16, 32

var b64 = base64.RawStdEncoding

// Hash returns the PHC string of secret under p.
func Hash(secret string, p Params) string {
	salt := make([]byte, saltLen)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(secret), salt, p.Time, p.Memory, p.Threads, keyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// ErrMalformed is returned for a stored hash flowd cannot read.
var ErrMalformed = errors.New("secret: malformed hash")

// Verify reports whether secret matches the PHC string hash, in constant time.
func Verify(secret, hash string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, ErrMalformed
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, ErrMalformed
	}
	var p Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil || p.Time == 0 || p.Threads == 0 || p.Memory > 1<<22 {
		return false, ErrMalformed
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, ErrMalformed
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, ErrMalformed
	}
	got := argon2.IDKey([]byte(secret), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

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
