package rekey

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// move is a flow whose personal data moved under the subject key to,
// from the key from (nil: from none).
type move struct {
	flow store.FlowKey
	from *subjectkey.Key
	to   subjectkey.Key
}

// moveUsesTx seals the free text of every use of the flows moved under its
// flow's new subject key: the text kept as written, or sealed under the key
// the flow was under; in one round trip when none has a use, three else.
func moveUsesTx(ctx context.Context, tx pgx.Tx, moves []move) error {
	if len(moves) == 0 {
		return nil
	}
	flows := make([]store.FlowKey, len(moves))
	byFlow := make(map[string]*move, len(moves))
	for i := range moves {
		flows[i], byFlow[moves[i].flow.ID] = moves[i].flow, &moves[i]
	}
	uses, err := store.UsesOfFlows(ctx, tx, flows)
	if err != nil {
		return err
	}
	sealed := make([]store.SealedUse, len(uses))
	for i, u := range uses {
		m := byFlow[u.FlowID]
		action, reference, err := useText(u, m.from)
		if err != nil {
			return err
		}
		actionSealed, referenceSealed := m.to.SealUse(u.ID, action, reference)
		sealed[i] = store.SealedUse{Use: u, KeyID: m.to.ID, Action: actionSealed, Reference: referenceSealed}
	}
	return store.SealUses(ctx, tx, sealed)
}

// useText is u's action and reference, kept as written or sealed under
// key.
func useText(u store.Use, key *subjectkey.Key) (action, reference string, err error) {
	if u.ActionSealed == nil {
		if u.Reference != nil {
			reference = *u.Reference
		}
		return *u.Action, reference, nil
	}
	if key == nil {
		return "", "", fmt.Errorf("use %s is sealed, its flow under no key", u.ID)
	}
	if action, err = key.Sealer.Open(key.Sealer.KeyID(), u.ActionSealed, store.UseContext(u.ID, "action")...); err != nil {
		return "", "", fmt.Errorf("use %s: %w", u.ID, err)
	}
	if u.ReferenceSealed != nil {
		if reference, err = key.Sealer.Open(key.Sealer.KeyID(), u.ReferenceSealed, store.UseContext(u.ID, "reference")...); err != nil {
			return "", "", fmt.Errorf("use %s: %w", u.ID, err)
		}
	}
	return action, reference, nil
}

// sealPlainUses seals, under their flow's subject key, up to limit uses
// recorded before a use's free text was sealed, after cursor, in one
// round trip, and returns how many it found and where it stands.
func sealPlainUses(ctx context.Context, pool *pgxpool.Pool, sealer *pii.Sealer, cursor store.IndexCursor, limit int) (int, store.IndexCursor, error) {
	plain, err := store.PlainUses(ctx, pool, cursor, limit)
	if err != nil || len(plain) == 0 {
		return 0, cursor, err
	}
	var sealed []store.SealedUse
	for _, u := range plain {
		if u.SubjectKeyID == nil || u.SubjectKeySealed == nil {
			continue // its flow moved or was erased meanwhile
		}
		key, err := subjectkey.Sealing(sealer, u.OrganizationID, *u.SubjectKeyID, u.SubjectKeySealed)
		if err != nil {
			return 0, cursor, err
		}
		action, reference, err := useText(u, nil)
		if err != nil {
			return 0, cursor, err
		}
		actionSealed, referenceSealed := key.SealUse(u.ID, action, reference)
		sealed = append(sealed, store.SealedUse{Use: u, KeyID: key.ID, Action: actionSealed, Reference: referenceSealed})
	}
	if err := store.SealUses(ctx, pool, sealed); err != nil {
		return 0, cursor, err
	}
	last := plain[len(plain)-1]
	return len(plain), store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}, nil
}
