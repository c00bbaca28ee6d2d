package signing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// sealedPrefix marks a signing secret stored encrypted.
const sealedPrefix = "v1:"

// Sealer encrypts signing secrets at rest with AES-256-GCM under a key derived
// from FLOWD_KEY_ENCRYPTION_KEY, so that a copy of the database alone cannot
// forge an organization's webhooks. The organization id is the associated
// data: a sealed secret moved to another organization's row does not open.
// Without a key it stores secrets as they are; it opens both forms.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns the sealer of kek; without a key, secrets are stored
// as they are.
func NewSealer(kek []byte) (*Sealer, error) {
	if len(kek) == 0 {
		return &Sealer{}, nil
	}
	key, err := hkdf.Key(sha256.New, kek, nil, "flowd webhook signing secrets", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts an organization's secret for storing.
func (s *Sealer) Seal(organizationID, secret string) string {
	if s.aead == nil {
		return secret
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(secret), []byte(organizationID)))
}

// Open reads a stored secret of the organization, sealed or not.
func (s *Sealer) Open(organizationID, stored string) (string, error) {
	rest, sealed := strings.CutPrefix(stored, sealedPrefix)
	if !sealed {
		return stored, nil
	}
	if s.aead == nil {
		return "", errors.New("webhooks: the signing secret is encrypted but no key encryption key is configured")
	}
	b, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", errors.New("webhooks: malformed sealed signing secret")
	}
	ns := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:ns], b[ns:], []byte(organizationID))
	if err != nil {
		return "", errors.New("webhooks: the signing secret does not open with the configured key encryption key")
	}
	return string(plain), nil
}
