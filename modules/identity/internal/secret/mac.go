package secret

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// Sizes of a client secret's MAC: a tag of the secret_hash and key it was
// made with, then HMAC-SHA-256 of the secret.
const (
	macTagSize = 16
	macSize    = macTagSize + sha256.Size
)

// MACs makes and checks the MACs of client secrets, under a key derived
// from FLOWD_KEY_ENCRYPTION_KEY: orgs makes one beside each new secret's
// argon2id hash, and the token service checks secrets by it. Secrets are
// 256 random bits, so a fast keyed hash is as safe a verifier as argon2id,
// and a wrong secret costs two HMACs: failures need no counting, so no one
// can lock a client out by failing on its behalf. The tag ties a MAC to the
// argon2id hash beside it and to this key: a secret changed without its MAC
// (by an earlier version of flowd) or a new key makes the MAC stale, and
// the hash decides again. Without a key (a command run without
// FLOWD_KEY_ENCRYPTION_KEY) there are no MACs.
type MACs struct {
	hmacs *sync.Pool // of *keyedHMAC; nil without a key
}

// keyedHMAC is HMAC-SHA-256 under the MAC key, with buffers for its input
// and output, so that a check allocates nothing.
type keyedHMAC struct {
	hash.Hash
	in, out []byte
}

// NewMACs returns the MACs under the key derived from kek; none without kek.
func NewMACs(kek []byte) MACs {
	if len(kek) == 0 {
		return MACs{}
	}
	key, err := hkdf.Key(sha256.New, kek, nil, "flowd client secret MACs", 32)
	if err != nil {
		// Only a length SHA-256 cannot give fails, and 32 is not one.
		panic(err)
	}
	return MACs{hmacs: &sync.Pool{New: func() any { return &keyedHMAC{Hash: hmac.New(sha256.New, key)} }}}
}

// Make returns the MAC of secret, stored beside storedHash; nil without a key.
func (s MACs) Make(storedHash, secret string) []byte {
	if s.hmacs == nil {
		return nil
	}
	h := s.hmacs.Get().(*keyedHMAC)
	defer s.hmacs.Put(h)
	mac := make([]byte, 0, macSize)
	mac = append(mac, h.sum(tagLabel, storedHash)[:macTagSize]...)
	return append(mac, h.sum(secretLabel, secret)...)
}

// Current reports whether mac was made beside storedHash under this key,
// so that it alone decides whether a secret is right.
func (s MACs) Current(mac []byte, storedHash string) bool {
	return s.hmacs != nil && len(mac) == macSize && s.equal(mac[:macTagSize], tagLabel, storedHash)
}

// Matches reports whether secret is the one a current mac was made of.
func (s MACs) Matches(mac []byte, secret string) bool {
	return s.equal(mac[macTagSize:], secretLabel, secret)
}

// The labels keep a tag from ever equalling a secret's MAC.
const (
	tagLabel    = "hash\x00"
	secretLabel = "secret\x00"
)

// equal reports, in constant time, whether want begins the HMAC of label
// and data.
func (s MACs) equal(want []byte, label, data string) bool {
	h := s.hmacs.Get().(*keyedHMAC)
	defer s.hmacs.Put(h)
	return hmac.Equal(want, h.sum(label, data)[:len(want)])
}

// sum returns the HMAC of label and data, in h's buffer.
func (h *keyedHMAC) sum(label, data string) []byte {
	h.Reset()
	h.in = append(append(h.in[:0], label...), data...)
	h.Write(h.in)
	h.out = h.Sum(h.out[:0])
	return h.out
}
