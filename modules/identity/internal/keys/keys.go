// Package keys makes the built-in provider's signing keys and seals their
// private part with AES-256-GCM under the key-encryption key, so that a copy
// of the database alone cannot sign tokens.
package keys

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/modules/identity/internal/secret"
)

// Algorithm is how flowd signs access tokens: ECDSA P-256 with SHA-256, small
// keys and signatures, fast to verify, and understood by every JOSE library.
const Algorithm = jose.ES256

// Key is a signing key, its private part in the clear.
type Key struct {
	ID      string
	Private *ecdsa.PrivateKey
}

// Generate makes a new key with a random key id.
func Generate() (Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: secret.ID("", 10), Private: priv}, nil
}

// PublicJWK returns the key's public JSON Web Key.
func (k Key) PublicJWK() ([]byte, error) {
	return json.Marshal(jose.JSONWebKey{Key: &k.Private.PublicKey, KeyID: k.ID, Algorithm: string(Algorithm), Use: "sig"})
}

// Seal encrypts the private key with kek; the key id is authenticated data,
// so a sealed key cannot be passed off as another.
func (k Key) Seal(kek []byte) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	return gcm.Seal(nonce, nonce, der, []byte(k.ID)), nil
}

// Open decrypts a sealed private key.
func Open(id string, sealed, kek []byte) (Key, error) {
	gcm, err := newGCM(kek)
	if err != nil {
		return Key{}, err
	}
	if len(sealed) < gcm.NonceSize() {
		return Key{}, errors.New("keys: sealed key too short")
	}
	der, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], []byte(id))
	if err != nil {
		return Key{}, fmt.Errorf("keys: cannot decrypt signing key %s (is FLOWD_KEY_ENCRYPTION_KEY the one it was made with?): %w", id, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return Key{}, err
	}
	priv, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return Key{}, fmt.Errorf("keys: signing key %s is a %T", id, k)
	}
	return Key{ID: id, Private: priv}, nil
}

// ParsePublic reads a public JSON Web Key as stored.
func ParsePublic(b []byte) (jose.JSONWebKey, error) {
	var k jose.JSONWebKey
	if err := json.Unmarshal(b, &k); err != nil {
		return k, err
	}
	if !k.Valid() || !k.IsPublic() {
		return k, errors.New("keys: stored JWK is not a valid public key")
	}
	return k, nil
}

func newGCM(kek []byte) (cipher.AEAD, error) {
	if len(kek) != 32 {
		return nil, errors.New("keys: the key-encryption key must be 32 bytes")
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
