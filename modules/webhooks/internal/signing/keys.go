package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// Standard Webhooks' prefixes of an asymmetric key pair's strings.
const (
	privateKeyPrefix = "whsk_"
	publicKeyPrefix  = "whpk_"
)

// errMalformedKey is a stored signing key that is not "whsk_<base64>" of an
// ed25519 private key.
var errMalformedKey = errors.New("webhooks: malformed signing key")

// KeyPair is an organization's ed25519 signing key pair in Standard
// Webhooks' spelling, with the public key's JWK thumbprint as its id.
type KeyPair struct {
	Private string // whsk_ and the base64 of the 64-byte private key
	Public  string // whpk_ and the base64 of the 32-byte public key
	ID      string
}

// NewKeyPair returns a fresh ed25519 key pair.
func NewKeyPair() KeyPair {
	pub, priv, _ := ed25519.GenerateKey(nil) // crypto/rand never fails (Go 1.24+).
	return KeyPair{
		Private: privateKeyPrefix + base64.StdEncoding.EncodeToString(priv),
		Public:  publicKeyPrefix + base64.StdEncoding.EncodeToString(pub),
		ID:      Thumbprint(pub),
	}
}

// JWK is a public key as a JSON Web Key (RFC 8037): what a JWKS lists.
type JWK struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	KeyID     string `json:"kid"`
	Use       string `json:"use"`
	Algorithm string `json:"alg"`
}

// PublicJWK returns the JWK of a "whpk_" public key.
func PublicJWK(public string) (JWK, error) {
	pub, err := decodeKey(public, publicKeyPrefix, ed25519.PublicKeySize)
	if err != nil {
		return JWK{}, err
	}
	return JWK{KeyType: "OKP", Curve: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), KeyID: Thumbprint(pub),
		Use: "sig", Algorithm: "EdDSA"}, nil
}

// Thumbprint is the RFC 7638 thumbprint of an ed25519 public key's JWK:
// an id a receiver can compute from the key itself.
func Thumbprint(pub ed25519.PublicKey) string {
	canonical := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// SignAsymmetric returns the v1a signatures of body sent as message id at
// timestamp (Unix seconds), one per "whsk_" private key in the order given,
// space-separated: ed25519 over "id.timestamp.body", as Standard Webhooks
// defines it.
func SignAsymmetric(privates []string, id string, timestamp int64, body []byte) (string, error) {
	content := signedContent(id, timestamp, body)
	sigs := make([]string, 0, len(privates))
	for _, p := range privates {
		priv, err := decodeKey(p, privateKeyPrefix, ed25519.PrivateKeySize)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(ed25519.PrivateKey(priv), content)))
	}
	return strings.Join(sigs, " "), nil
}

// signedContent is what a Standard Webhooks signature signs.
func signedContent(id string, timestamp int64, body []byte) []byte {
	var b strings.Builder
	b.WriteString(id)
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(timestamp, 10))
	b.WriteByte('.')
	b.Write(body)
	return []byte(b.String())
}

func decodeKey(s, prefix string, size int) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return nil, errMalformedKey
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(b) != size {
		return nil, errMalformedKey
	}
	return b, nil
}
