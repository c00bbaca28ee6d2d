// Package testkeys makes the key pairs that tests of private_key_jwt and
// DPoP sign with: a client's private key and the public key set it registers.
package testkeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// EC returns a new P-256 key, the kind ES256 signs with.
func EC(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// PublicJWKS returns the JSON Web Key Set of k's public key under kid, as
// a client registers it.
func PublicJWKS(t testing.TB, kid string, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: kid, Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
