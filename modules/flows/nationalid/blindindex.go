package nationalid

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// BlindIndex makes the blind index of a national id: a keyed HMAC-SHA256
// of the normalised id under a key derived from FLOWD_KEY_ENCRYPTION_KEY for
// this use alone. Each flow stores it beside the key's version, so that the
// person's own page finds all their flows, in every organization, by one
// index lookup, while the id itself stays sealed. The index never leaves
// flowd: no API body, event or log carries it.
type BlindIndex struct {
	key     []byte
	version string
}

// NewBlindIndex derives the index key from kek (32 bytes). Its version is
// a digest of the key, so a new key encryption key is a new version, and
// the rows of the old one are found and re-indexed by version.
func NewBlindIndex(kek []byte) *BlindIndex {
	key, err := hkdf.Key(sha256.New, kek, nil, "flowd person blind index v1", 32)
	if err != nil {
		panic(err) // only for lengths SHA-256 cannot give
	}
	id, err := hkdf.Key(sha256.New, kek, nil, "flowd person blind index version v1", 6)
	if err != nil {
		panic(err)
	}
	return &BlindIndex{key: key, version: hex.EncodeToString(id)}
}

// Version names the key Of uses now.
func (p *BlindIndex) Version() string { return p.version }

// Of returns the blind index of nationalID, normalised as Normalize
// does, so that "010170 12345" and "01017012345" index alike.
func (p *BlindIndex) Of(nationalID string) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(Normalize(nationalID)))
	return m.Sum(nil)
}

// Normalize is the form two national ids are compared in: without
// spaces and the separators '-' and '+', in upper case.
func Normalize(id string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '+' {
			return -1
		}
		return r
	}, id))
}
