package idempotency

import (
	"crypto/hmac"
	"fmt"
)

// Flow creations kept their keys in the flows module's flow_idempotency_keys
// until the migration one_idempotency_store carried each unexpired one over
// into this table. Such a row (carried is not null) differs from the others
// in two ways that SQL could not undo: its request hash is the flows
// module's keyed hash of the create's fields, not a hash of the request,
// and body_sealed holds only the consent link, sealed as the flows module
// sealed it. The operation that may hold such a row brings a Carried with
// its Request to read it; nothing writes one any more, and the last expires
// 24 hours after the upgrade.

// Carried reads, for the one operation that has them, the rows carried over
// from an older store.
type Carried interface {
	// Fingerprint returns the text the older store hashed for r, or false
	// when r cannot be the request of a carried row.
	Fingerprint(r Request) (string, bool)
	// Body makes the answer's body of the flow a carried row created, from
	// its id, its reference and its opened consent link.
	Body(flowID, referenceID, consentURL string) ([]byte, error)
}

// carriedRow is what a carried row keeps in its carried column.
type carriedRow struct {
	FlowID      string `json:"flowId"`
	ReferenceID string `json:"referenceId"`
}

// carriedHashDomain is the domain the older store's request hashes were
// made in.
const carriedHashDomain = "idempotency"

// carriedSealContext binds a carried row's consent link to its flow, as the
// older store sealed it.
func carriedSealContext(flowID string) []string { return []string{"idempotency:" + flowID} }

// carriedAnswer is Lookup's answer from a carried row: a (status and headers
// as the row keeps them) with the body r's Carried makes, or mismatch when r
// is not the request the row's hash was made of.
func (k *Keys) carriedAnswer(r Request, row carriedRow, hash []byte, keyID string, sealed []byte,
	a Answer, mismatch *MismatchError) (Answer, error) {
	if r.Carried == nil {
		return Answer{}, mismatch
	}
	request, ok := r.Carried.Fingerprint(r)
	if !ok || !hmac.Equal(hash, k.sealer.Hash(carriedHashDomain, request)) &&
		!k.sealer.HashMatches(carriedHashDomain, request, hash) {
		return Answer{}, mismatch
	}
	link, err := k.sealer.Open(keyID, sealed, carriedSealContext(row.FlowID)...)
	if err != nil {
		return Answer{}, fmt.Errorf("idempotency: consent link of a carried answer: %w", err)
	}
	if a.Body, err = r.Carried.Body(row.FlowID, row.ReferenceID, link); err != nil {
		return Answer{}, err
	}
	return a, nil
}
