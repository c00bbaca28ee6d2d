package flows

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// Flow creation keeps its Idempotency-Keys in flow_idempotency_keys: Create
// claims a key first in the create's transaction, so that a concurrent
// create with the same key waits for it and then replays its result. The
// API's other POSTs keep their answers in internal/idempotency under the same
// rules (its MaxKey and TTL are this module's limits too).

// requestHash identifies a create request for its idempotency key. It is a
// keyed hash because the request holds a national id.
func (m *Manager) requestHash(c Caller, in NewFlow) []byte {
	return m.sealer.Hash("idempotency", requestKey(c, in))
}

// requestKey is what requestHash hashes.
func requestKey(c Caller, in NewFlow) string {
	parts := []string{c.ClientID, strconv.FormatBool(c.Sandbox), in.NationalID, in.LastName, in.RedirectURL, in.WebhookURL, in.ReferenceName}
	// A definition is hashed only when named, so that keys stored before
	// definitions existed still match their requests.
	if in.FlowDefinitionID != "" || in.FlowDefinitionVersion != 0 {
		parts = append(parts, in.FlowDefinitionID, strconv.Itoa(in.FlowDefinitionVersion))
	}
	// Parameters likewise, by name.
	for _, name := range slices.Sorted(maps.Keys(in.Parameters)) {
		parts = append(parts, "parameter:"+name, in.Parameters[name])
	}
	for i, p := range parts {
		parts[i] = strconv.Quote(p)
	}
	return strings.Join(parts, ",")
}

// IdempotencyKeyHeld implements Service.
func (m *Manager) IdempotencyKeyHeld(ctx context.Context, c Caller, idempotencyKey string) (bool, error) {
	held, err := store.KeyHeld(ctx, m.pool, c.OrganizationID, idempotencyKey)
	return held, database.Classify(err)
}

// replay answers a create whose idempotency key an earlier create holds.
// request is the create's requestKey: a key stored before a data-key
// rotation was hashed under the previous key, which still matches.
func (m *Manager) replay(ctx context.Context, tx pgx.Tx, claim store.IdempotencyKey, request string) (Created, error) {
	k, err := store.GetKey(ctx, tx, claim.OrganizationID, claim.Key)
	if errors.Is(err, database.ErrNotFound) {
		// The key expired between the claim and this read: rare; the client may retry.
		return Created{}, apperr.New(apperr.Conflict, "The Idempotency-Key expired while this request ran. Retry it.")
	}
	if err != nil {
		return Created{}, err
	}
	if !hmac.Equal(k.RequestHash, claim.RequestHash) && !m.sealer.HashMatches("idempotency", request, k.RequestHash) {
		return Created{}, apperr.New(apperr.IdempotencyMismatch,
			"This Idempotency-Key was used within the last 24 hours with a different request.")
	}
	consentURL, err := m.sealer.Open(k.PIIKeyID, k.ConsentSealed, "idempotency:"+k.FlowID)
	if err != nil {
		return Created{}, fmt.Errorf("flows: idempotency key result: %w", err)
	}
	return Created{FlowID: k.FlowID, ReferenceID: k.ReferenceID, ConsentURL: consentURL, Replayed: true}, nil
}

// PurgeExpiredKeys deletes idempotency keys older than 24 hours, in batches,
// and returns how many it deleted.
func (m *Manager) PurgeExpiredKeys(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := store.PurgeKeys(ctx, m.pool, 1000)
		total += n
		if err != nil || n < 1000 {
			return total, err
		}
	}
}
