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

// Minimum is the least cost ParseParams accepts: OWASP's lowest argon2id
// setting (19 MiB, 2 passes). The settings OWASP lists as its equals trade
// memory for passes at about the same product, which Minimum bounds too.
var Minimum = Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1}

// ParseParams reads argon2id costs written as in a PHC string,
// "m=65536,t=3,p=2" (memory in KiB, passes, lanes), for operators who tune
// the cost to their hardware. It refuses costs below Minimum.
func ParseParams(s string) (Params, error) {
	p := Params{SaltLength: Default.SaltLength, KeyLength: Default.KeyLength}
	var extra string
	if n, _ := fmt.Sscanf(s+" ", "m=%d,t=%d,p=%d %s", &p.Memory, &p.Iterations, &p.Parallelism, &extra); n != 3 {
		return Params{}, fmt.Errorf("secrethash: %q is not m=<KiB>,t=<passes>,p=<lanes>", s)
	}
	if err := p.Validate(); err != nil {
		return Params{}, err
	}
	if p.Memory < 7*1024 || uint64(p.Memory)*uint64(p.Iterations) < uint64(Minimum.Memory)*uint64(Minimum.Iterations) ||
		p.Memory > 4<<20 || p.Iterations > 100 {
		return Params{}, fmt.Errorf("secrethash: m=%d,t=%d costs less than OWASP's least (m=%d,t=%d) or more than a server can give",
			p.Memory, p.Iterations, Minimum.Memory, Minimum.Iterations)
	}
	return p, nil
}

// String writes p's costs as ParseParams reads them.
func (p Params) String() string {
	return fmt.Sprintf("m=%d,t=%d,p=%d", p.Memory, p.Iterations, p.Parallelism)
}

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
