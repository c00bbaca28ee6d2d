// Package secrethash hashes passwords and other low-entropy secrets with
// argon2id and encodes the result as a PHC string
// ($argon2id$v=19$m=65536,t=3,p=2$salt$hash), so that the parameters travel
// with each hash and can be raised later without invalidating stored ones.
package secrethash

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters.
type Params struct {
	Memory      uint32 // KiB
	Iterations  uint32
	Parallelism uint8
	SaltLength  uint32
	KeyLength   uint32
}

// Default follows OWASP's argon2id recommendation (64 MiB, 3 passes) for
// interactive logins on a server.
var Default = Params{Memory: 64 * 1024, Iterations: 3, Parallelism: 2, SaltLength: 16, KeyLength: 32}

// Cheap is for tests only: it keeps the encoding and the code path but costs
// almost nothing, so that suites with many logins stay fast.
var Cheap = Params{Memory: 64, Iterations: 1, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// ErrMalformed is returned by Verify for a stored hash it cannot parse.
var ErrMalformed = errors.New("secrethash: malformed hash")

var b64 = base64.RawStdEncoding

// Validate reports parameters argon2id cannot use or that are too weak to mean anything.
func (p Params) Validate() error {
	if p.Memory < 8*uint32(p.Parallelism) || p.Iterations == 0 || p.Parallelism == 0 || p.KeyLength < 16 || p.SaltLength < 8 {
		return fmt.Errorf("secrethash: unusable parameters %+v", p)
	}
	return nil
}

// Hash returns the PHC string of secret under p with a fresh random salt.
func Hash(secret string, p Params) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	salt := make([]byte, p.SaltLength)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(secret), salt, p.Iterations, p.Memory, p.Parallelism, p.KeyLength)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Iterations, p.Parallelism, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// Verify reports whether secret matches the PHC string encoded, in constant
// time. It returns ErrMalformed when encoded is not an argon2id hash.
func Verify(secret, encoded string) (bool, error) {
	p, salt, key, err := decode(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(secret), salt, p.Iterations, p.Memory, p.Parallelism, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

// NeedsRehash reports whether encoded was made with weaker parameters than p,
// so that a caller may store a new hash after a successful Verify.
func NeedsRehash(encoded string, p Params) bool {
	old, _, _, err := decode(encoded)
	return err != nil || old.Memory < p.Memory || old.Iterations < p.Iterations
}

func decode(encoded string) (Params, []byte, []byte, error) {
	parts := strings.Split(encoded, "$")
	// "", "argon2id", "v=19", "m=…,t=…,p=…", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return Params{}, nil, nil, ErrMalformed
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return Params{}, nil, nil, ErrMalformed
	}
	var p Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Iterations, &p.Parallelism); err != nil ||
		p.Iterations == 0 || p.Parallelism == 0 || p.Memory < 8*uint32(p.Parallelism) || p.Memory > 4<<20 || p.Iterations > 100 {
		return Params{}, nil, nil, ErrMalformed
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return Params{}, nil, nil, ErrMalformed
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 {
		return Params{}, nil, nil, ErrMalformed
	}
	p.SaltLength, p.KeyLength = uint32(len(salt)), uint32(len(key))
	return p, salt, key, nil
}
