package keygen

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func TestSealAndOpen(t *testing.T) {
	t.Parallel()
	kek := bytes.Repeat([]byte{1}, 32)
	for _, alg := range Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			k, err := Generate(alg)
			if err != nil {
				t.Fatal(err)
			}
			sealed, err := k.Seal(kek)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Open(k.ID, alg, sealed, kek)
			if err != nil || back.Algorithm != alg || !back.Private.(interface{ Equal(crypto.PrivateKey) bool }).Equal(k.Private) {
				t.Fatalf("open: %v", err)
			}
			if _, err := Open(k.ID, alg, sealed, bytes.Repeat([]byte{2}, 32)); err == nil || !strings.Contains(err.Error(), "FLOWD_KEY_ENCRYPTION_KEY") {
				t.Fatalf("another key-encryption key opened it: %v", err)
			}
			if _, err := Open("other-kid", alg, sealed, kek); err == nil {
				t.Fatal("a sealed key passed off under another key id opened")
			}
			for _, other := range Algorithms {
				if _, err := Open(k.ID, other, sealed, kek); other != alg && err == nil {
					t.Fatalf("a %s key opened as %s", alg, other)
				}
			}
			pub, err := k.PublicJWK()
			if err != nil || bytes.Contains(pub, []byte(`"d"`)) || bytes.Contains(pub, []byte(`"p"`)) {
				t.Fatalf("public JWK %s %v", pub, err)
			}
			var fields map[string]any
			_ = json.Unmarshal(pub, &fields)
			if fields["kid"] != k.ID || fields["alg"] != string(alg) || fields["use"] != "sig" {
				t.Fatalf("public JWK %s lacks kid, alg or use", pub)
			}
			jwk, err := ParsePublic(pub)
			if err != nil {
				t.Fatal(err)
			}
			if rk, ok := jwk.Key.(*rsa.PublicKey); alg == jose.RS256 && (!ok || rk.N.BitLen() < 2048) {
				t.Fatalf("RS256 key %T, at least 2048 bits wanted", jwk.Key)
			}
		})
	}
}
