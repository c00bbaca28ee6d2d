// Package testkeys makes the key pairs that tests of private_key_jwt and
// DPoP sign with: a client's private key and the public key set it registers.
package testkeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"sync"
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

// RSA is one 2048-bit key for the whole test binary: generating one per
// test would dominate its run time.
var RSA = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// JWKS returns the JSON Web Key Set of the public halves of keys (RSA or
// EC private keys), by kid.
func JWKS(t testing.TB, keys map[string]any) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		var pub any
		switch k := k.(type) {
		case *rsa.PrivateKey:
			pub = &k.PublicKey
		case *ecdsa.PrivateKey:
			pub = &k.PublicKey
		default:
			t.Fatalf("testkeys: a %T is no private key of RSA or EC", k)
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: pub, KeyID: kid, Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
