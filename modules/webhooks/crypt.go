package webhooks

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

// sealer encrypts signing secrets at rest with AES-256-GCM under a key derived
// from FLOWD_KEY_ENCRYPTION_KEY, so that a copy of the database alone cannot
// forge an organization's webhooks. The organization id is the associated
// data: a sealed secret moved to another organization's row does not open.
// Without a key it stores secrets as they are; it opens both forms.
type sealer struct{ aead cipher.AEAD }

func newSealer(kek []byte) (*sealer, error) {
	if len(kek) == 0 {
		return &sealer{}, nil
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
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(organizationID, secret string) string {
	if s.aead == nil {
		return secret
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(secret), []byte(organizationID)))
}

func (s *sealer) open(organizationID, stored string) (string, error) {
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
