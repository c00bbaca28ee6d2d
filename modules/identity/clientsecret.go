package identity

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// Sizes of a client secret's MAC: a tag of the secret_hash and key it was
// made with, then HMAC-SHA-256 of the secret.
const (
	secretMACTagSize = 16
	secretMACSize    = secretMACTagSize + sha256.Size
)

// secretMACs makes and checks the MACs of client secrets, under a key
// derived from FLOWD_KEY_ENCRYPTION_KEY. Secrets are 256 random bits, so a
// fast keyed hash is as safe a verifier as argon2id, and a wrong secret
// costs two HMACs: failures need no counting, so no one can lock a client
// out by failing on its behalf. The tag ties a MAC to the argon2id hash
// beside it and to this key: a secret changed without its MAC (by an
// earlier version of flowd) or a new key makes the MAC stale, and the hash
// decides again. Without a key (a command run without
// FLOWD_KEY_ENCRYPTION_KEY) there are no MACs.
type secretMACs struct {
	hmacs *sync.Pool // of *keyedHMAC; nil without a key
}

// keyedHMAC is HMAC-SHA-256 under the MAC key, with buffers for its input
// and output, so that a check allocates nothing.
type keyedHMAC struct {
	hash.Hash
	in, out []byte
}

func newSecretMACs(kek []byte) secretMACs {
	if len(kek) == 0 {
		return secretMACs{}
	}
	key, err := hkdf.Key(sha256.New, kek, nil, "flowd client secret MACs", 32)
	if err != nil {
		// Only a length SHA-256 cannot give fails, and 32 is not one.
		panic(err)
	}
	return secretMACs{hmacs: &sync.Pool{New: func() any { return &keyedHMAC{Hash: hmac.New(sha256.New, key)} }}}
}

// make returns the MAC of secret, stored beside storedHash; nil without a key.
func (s secretMACs) make(storedHash, secret string) []byte {
	if s.hmacs == nil {
		return nil
	}
	h := s.hmacs.Get().(*keyedHMAC)
	defer s.hmacs.Put(h)
	mac := make([]byte, 0, secretMACSize)
	mac = append(mac, h.sum(tagLabel, storedHash)[:secretMACTagSize]...)
	return append(mac, h.sum(secretLabel, secret)...)
}

// current reports whether mac was made beside storedHash under this key,
// so that it alone decides whether a secret is right.
func (s secretMACs) current(mac []byte, storedHash string) bool {
	return s.hmacs != nil && len(mac) == secretMACSize && s.equal(mac[:secretMACTagSize], tagLabel, storedHash)
}

// matches reports whether secret is the one a current mac was made of.
func (s secretMACs) matches(mac []byte, secret string) bool {
	return s.equal(mac[secretMACTagSize:], secretLabel, secret)
}

// The labels keep a tag from ever equalling a secret's MAC.
const (
	tagLabel    = "hash\x00"
	secretLabel = "secret\x00"
)

// equal reports, in constant time, whether want begins the HMAC of label
// and data.
func (s secretMACs) equal(want []byte, label, data string) bool {
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

// newSecret makes a client secret with its argon2id hash, which earlier
// versions of flowd check, and its MAC, which this one checks.
func (m *Module) newSecret() (secret, storedHash string, mac []byte) {
	secret = newClientSecret()
	storedHash = mustHash(secret, m.cfg.HashParams)
	return secret, storedHash, m.macs.make(storedHash, secret)
}

// checkSecret checks a client secret. A current MAC decides at the cost of
// two HMACs. Without one (a secret stored before MACs, or by a command run
// without the key) the argon2id hash decides, on the costly path that gate
// bounds per address, and a match stores the MAC, so that the client pays
// argon2id once. An assertion-only client has no secret: any secret fails
// like a wrong one.
func (m *Module) checkSecret(ctx context.Context, c store.Client, secret string, gate *costGate) error {
	if c.SecretHash == "" {
		return refuse("Client authentication failed.")
	}
	if m.macs.current(c.SecretMAC, c.SecretHash) {
		if !m.macs.matches(c.SecretMAC, secret) {
			return refuse("Client authentication failed.")
		}
		return nil
	}
	if err := gate.enter(); err != nil {
		return err
	}
	select {
	case m.hashing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	ok, err := secrethash.Verify(secret, c.SecretHash)
	<-m.hashing
	if err != nil {
		return err
	}
	if !ok {
		return refuse("Client authentication failed.")
	}
	if mac := m.macs.make(c.SecretHash, secret); mac != nil {
		if err := store.SetClientSecretMAC(ctx, m.pool, c.ID, c.SecretHash, mac); err != nil {
			// The secret is right; the MAC is stored at its next use.
			m.log.WarnContext(ctx, "identity: storing a client secret's MAC", "client_id", c.ID, "error", database.Classify(err))
		}
	}
	return nil
}
