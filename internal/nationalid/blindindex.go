package nationalid

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// BlindIndex makes the blind index of a national id: a keyed HMAC-SHA256
// of its canonical form under a key derived from FLOWD_KEY_ENCRYPTION_KEY
// for this use alone. Each flow stores it beside the key's version, so that
// the person's own page finds all their flows, in every organization, by
// one index lookup, while the id itself stays sealed. The index never
// leaves flowd: no API body, event or log carries it.
type BlindIndex struct {
	key     []byte
	version string
}

// indexRevisions name, per format, the canonical forms an index was made
// of where they are not those flowd indexed before it had canonical forms:
// a Swedish 10-digit number was indexed without its century. A revision
// is part of the version, so the rows indexed before are found and indexed
// again ("flowd flows reindex"). Elsewhere the forms did not change, nor
// does the version.
var indexRevisions = map[string]string{FormatSweden: "-se2"}

// NewBlindIndex derives the index key from kek (32 bytes), for the
// canonical forms of format. Its version is a digest of the key and the
// format's revision, so a new key encryption key, or a new reading of the
// format, is a new version, and the rows of the old one are found and
// re-indexed by version.
func NewBlindIndex(kek []byte, format Format) *BlindIndex {
	key, err := hkdf.Key(sha256.New, kek, nil, "flowd person blind index v1", 32)
	if err != nil {
		panic(err) // only for lengths SHA-256 cannot give
	}
	id, err := hkdf.Key(sha256.New, kek, nil, "flowd person blind index version v1", 6)
	if err != nil {
		panic(err)
	}
	return &BlindIndex{key: key, version: hex.EncodeToString(id) + indexRevisions[format.Name()]}
}

// Version names the key Of uses now.
func (p *BlindIndex) Version() string { return p.version }

// Of returns the blind index of canonical, a national id in its canonical
// form (Format.Canonical), so that every spelling of one person's number
// indexes alike.
func (p *BlindIndex) Of(canonical string) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(canonical))
	return m.Sum(nil)
}
