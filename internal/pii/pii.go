// Package pii seals personal data at rest. Values are encrypted with
// AES-256-GCM under a key derived from FLOWD_DATA_KEY and bound to the row
// they belong to (associated data), so a ciphertext copied to another row does
// not open. Each ciphertext is stored beside the id of the key that sealed it,
// so that a later rotation can open old rows with the previous key while
// sealing new ones with the current key. Exact lookups (a national id) use a
// keyed HMAC instead of the plaintext.
package pii

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
)

// ErrUnknownKey means a ciphertext was sealed by a key this Sealer does not hold.
var ErrUnknownKey = errors.New("pii: unknown data key")

// ErrCorrupt means a ciphertext does not open: wrong row, tampered or truncated.
var ErrCorrupt = errors.New("pii: ciphertext does not open")

type key struct {
	id   string
	aead cipher.AEAD
	mac  []byte
}

// Sealer encrypts and hashes personal data. It is safe for concurrent use.
type Sealer struct {
	current key
	byID    map[string]key
}

// New returns a Sealer that seals with dataKey (32 bytes) and opens values
// sealed by dataKey or any of previous.
func New(dataKey []byte, previous ...[]byte) (*Sealer, error) {
	s := &Sealer{byID: map[string]key{}}
	for i, raw := range append([][]byte{dataKey}, previous...) {
		k, err := deriveKey(raw)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			s.current = k
		}
		if _, dup := s.byID[k.id]; !dup {
			s.byID[k.id] = k
		}
	}
	return s, nil
}

func deriveKey(raw []byte) (key, error) {
	if len(raw) != 32 {
		return key{}, fmt.Errorf("pii: the data key must be 32 bytes, not %d", len(raw))
	}
	aead, err := deriveAEAD(raw)
	if err != nil {
		return key{}, err
	}
	mac, err := hkdf.Key(sha256.New, raw, nil, "flowd pii lookup hmac v1", 32)
	if err != nil {
		return key{}, err
	}
	idBytes, err := hkdf.Key(sha256.New, raw, nil, "flowd pii key id v1", 6)
	if err != nil {
		return key{}, err
	}
	return key{id: hex.EncodeToString(idBytes), aead: aead, mac: mac}, nil
}

// deriveAEAD is the AES-256-GCM of the encryption key derived from raw.
func deriveAEAD(raw []byte) (cipher.AEAD, error) {
	enc, err := hkdf.Key(sha256.New, raw, nil, "flowd pii encryption v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(enc)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Opener opens what a Sealer of the same key sealed, and does nothing
// else: it derives the encryption key alone, a third of New's work, for a
// key that is opened often and used for one read (a person's own key).
type Opener struct{ aead cipher.AEAD }

// NewOpener returns the Opener of key (32 bytes).
func NewOpener(key []byte) (*Opener, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("pii: the data key must be 32 bytes, not %d", len(key))
	}
	aead, err := deriveAEAD(key)
	if err != nil {
		return nil, err
	}
	return &Opener{aead: aead}, nil
}

// Open decrypts what Seal returned under the Opener's key with the same
// context, as Sealer.Open does.
func (o *Opener) Open(sealed []byte, context ...string) (string, error) {
	return open(o.aead, sealed, context)
}

// KeyID names the key Seal uses now; store it beside each ciphertext.
func (s *Sealer) KeyID() string { return s.current.id }

// Seal encrypts plaintext bound to context (such as "flow:<id>:nationalId";
// its parts are joined), returning nonce and ciphertext in one slice.
func (s *Sealer) Seal(plaintext string, context ...string) []byte {
	nonce := make([]byte, s.current.aead.NonceSize(), s.current.aead.NonceSize()+len(plaintext)+s.current.aead.Overhead())
	_, _ = rand.Read(nonce)
	return s.current.aead.Seal(nonce, nonce, []byte(plaintext), joinContext(nil, context))
}

// Open decrypts what Seal returned under the key named keyID with the same
// context. The context comes in parts, so that a caller need not allocate
// their concatenation: a list page opens ten values.
func (s *Sealer) Open(keyID string, sealed []byte, context ...string) (string, error) {
	k, ok := s.byID[keyID]
	if !ok {
		return "", ErrUnknownKey
	}
	return open(k.aead, sealed, context)
}

// OpenUnderAny is Open for a value stored without its key's id: it tries
// the current key, then each previous one. A key that did not seal the
// value fails its authentication, so a wrong key opens nothing.
func (s *Sealer) OpenUnderAny(sealed []byte, context ...string) (string, error) {
	plain, err := open(s.current.aead, sealed, context)
	if err == nil {
		return plain, nil
	}
	for id, k := range s.byID {
		if id == s.current.id {
			continue
		}
		if plain, err := open(k.aead, sealed, context); err == nil {
			return plain, nil
		}
	}
	return "", err
}

// open decrypts sealed, nonce and ciphertext, with aead under context.
func open(aead cipher.AEAD, sealed []byte, context []string) (string, error) {
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return "", ErrCorrupt
	}
	// The context and the plaintext pass through a reused buffer: what
	// reaches an AEAD's methods escapes, and a list page opens ten values.
	buf := openBuffers.Get().(*[]byte)
	defer openBuffers.Put(buf)
	aad := joinContext((*buf)[:0], context)
	*buf = aad[:0] // keep what append grew
	plain, err := aead.Open(aad[len(aad):], sealed[:n], sealed[n:], aad)
	if err != nil {
		return "", ErrCorrupt
	}
	return string(plain), nil
}

// joinContext appends context's parts to dst.
func joinContext(dst []byte, context []string) []byte {
	for _, part := range context {
		dst = append(dst, part...)
	}
	return dst
}

// openBuffers hold Open's context and plaintext.
var openBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// HashMatches reports whether sum is Hash(domain, value) under the current
// key or any previous one: hashes that cannot be recomputed on rotation (an
// idempotency key's request, whose body is not kept) still match while the
// key that made them is configured.
func (s *Sealer) HashMatches(domain, value string, sum []byte) bool {
	ok := false
	for _, k := range s.byID {
		if hmac.Equal(hashWith(k.mac, domain, value), sum) {
			ok = true
		}
	}
	return ok
}

// Hash returns a keyed HMAC-SHA256 of value in domain (such as "nationalId"),
// for exact lookups without storing the value. It is deterministic for the
// current key, so rows sealed under a previous key need rehashing on rotation.
func (s *Sealer) Hash(domain, value string) []byte {
	return hashWith(s.current.mac, domain, value)
}

func hashWith(key []byte, domain, value string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(value))
	return m.Sum(nil)
}

// Hashes returns Hash(domain, value) under the current key and every
// previous one: what a lookup compares with while rows hashed under an
// older key wait to be sealed again.
func (s *Sealer) Hashes(domain, value string) [][]byte {
	out := [][]byte{s.Hash(domain, value)}
	for id, k := range s.byID {
		if id != s.current.id {
			out = append(out, hashWith(k.mac, domain, value))
		}
	}
	return out
}
