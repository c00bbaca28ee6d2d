// Package keygen makes the built-in provider's signing keys and seals their
// private part with AES-256-GCM under the key-encryption key, so that a copy
// of the database alone cannot sign tokens.
package keygen

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/modules/identity/internal/secret"
)

// Algorithms are the algorithms flowd signs with, one active key each.
// ES256 (ECDSA P-256 with SHA-256: small keys and signatures, fast to verify)
// signs access tokens and the ID tokens of clients that ask for it. RS256
// signs ID tokens by default: OpenID Connect requires every provider to offer
// it, and some relying parties (Spring Security's default decoder) accept
// nothing else.
var Algorithms = []jose.SignatureAlgorithm{jose.ES256, jose.RS256}

// rsaBits is the size of new RSA keys: RFC 7518 3.3's minimum, which is
// what the large OpenID providers publish; keys rotate and ID tokens live
// minutes.
const rsaBits = 2048

// Key is a signing key, its private part in the clear.
type Key struct {
	ID        string
	Algorithm jose.SignatureAlgorithm
	// Private is an *ecdsa.PrivateKey (ES256) or an *rsa.PrivateKey (RS256).
	Private crypto.Signer
}

// Generate makes a new key of alg with a random key id.
func Generate(alg jose.SignatureAlgorithm) (Key, error) {
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, rsaBits)
	default:
		return Key{}, fmt.Errorf("keys: cannot make %s keys", alg)
	}
	if err != nil {
		return Key{}, err
	}
	return Key{ID: secret.ID("", 10), Algorithm: alg, Private: priv}, nil
}

// PublicJWK returns the key's public JSON Web Key, with its kid, alg and use.
func (k Key) PublicJWK() ([]byte, error) {
	return json.Marshal(jose.JSONWebKey{Key: k.Private.Public(), KeyID: k.ID, Algorithm: string(k.Algorithm), Use: "sig"})
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

// Open decrypts a sealed private key of alg; a key of another type is an error.
func Open(id string, alg jose.SignatureAlgorithm, sealed, kek []byte) (Key, error) {
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
	switch priv := k.(type) {
	case *ecdsa.PrivateKey:
		if alg == jose.ES256 && priv.Curve == elliptic.P256() {
			return Key{ID: id, Algorithm: alg, Private: priv}, nil
		}
	case *rsa.PrivateKey:
		if alg == jose.RS256 && priv.N.BitLen() >= rsaBits {
			return Key{ID: id, Algorithm: alg, Private: priv}, nil
		}
	}
	return Key{}, fmt.Errorf("keys: signing key %s is a %T, not a %s key", id, k, alg)
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
