package signing

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestThumbprintRFC8037 checks the key id against RFC 8037's example
// (appendix A.3): the thumbprint of its Ed25519 public key.
func TestThumbprintRFC8037(t *testing.T) {
	t.Parallel()
	pub, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Thumbprint(pub), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("thumbprint %s, want %s", got, want)
	}
}

// TestSignAsymmetric: one v1a signature per key, in order, over
// "id.timestamp.body"; the JWK and whpk_ forms name the same key.
func TestSignAsymmetric(t *testing.T) {
	t.Parallel()
	a, b := NewKeyPair(), NewKeyPair()
	header, err := SignAsymmetric([]string{a.Private, b.Private}, "msg_1", 1614265330, []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(header, " ")
	if len(parts) != 2 {
		t.Fatalf("header %q, want two signatures", header)
	}
	for i, k := range []KeyPair{a, b} {
		jwk, err := PublicJWK(k.Public)
		if err != nil || jwk.KeyID != k.ID || jwk.KeyType != "OKP" || jwk.Curve != "Ed25519" {
			t.Fatalf("JWK of %s: %+v, %v", k.Public, jwk, err)
		}
		pub, _ := base64.RawURLEncoding.DecodeString(jwk.X)
		sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(parts[i], "v1a,"))
		if err != nil || !strings.HasPrefix(parts[i], "v1a,") || !ed25519.Verify(pub, []byte(`msg_1.1614265330.{"x":1}`), sig) {
			t.Errorf("signature %d %q does not verify with key %s", i, parts[i], k.ID)
		}
	}
	if _, err := SignAsymmetric([]string{"whsk_bm90IGEga2V5"}, "msg_1", 1, nil); err == nil {
		t.Error("a malformed private key signed")
	}
}

// TestSchemes: an endpoint's own signature alone, and both within Overlap
// after its signing changed.
func TestSchemes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	recent, old := now.Add(-Overlap+time.Minute), now.Add(-Overlap)
	for _, c := range []struct {
		signing          string
		changed          *time.Time
		symmetric, asymm bool
	}{
		{"symmetric", nil, true, false},
		{"", nil, true, false},
		{"asymmetric", nil, false, true},
		{"asymmetric", &recent, true, true},
		{"symmetric", &recent, true, true},
		{"asymmetric", &old, false, true},
	} {
		s, a := Schemes(c.signing, c.changed, now)
		if s != c.symmetric || a != c.asymm {
			t.Errorf("Schemes(%q, %v) = %v, %v; want %v, %v", c.signing, c.changed, s, a, c.symmetric, c.asymm)
		}
	}
}
