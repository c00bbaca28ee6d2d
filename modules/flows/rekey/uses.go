package rekey

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// moveUsesTx seals the free text of every use of the flow flowID of
// organizationID under to, its flow's new subject key: the text kept as
// written, or sealed under from, the key the flow was under (nil when it
// was under none).
func moveUsesTx(ctx context.Context, tx pgx.Tx, organizationID, flowID string, from *subjectkey.Key, to subjectkey.Key) error {
	uses, err := store.UsesOfFlow(ctx, tx, organizationID, flowID)
	if err != nil {
		return err
	}
	for _, u := range uses {
		action, reference, err := useText(u, from)
		if err != nil {
			return err
		}
		actionSealed, referenceSealed := to.SealUse(u.ID, action, reference)
		if err := store.SealUse(ctx, tx, u, to.ID, actionSealed, referenceSealed); err != nil {
			return err
		}
	}
	return nil
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
// transaction, and returns how many it found and where it stands.
func sealPlainUses(ctx context.Context, pool *pgxpool.Pool, sealer *pii.Sealer, cursor store.IndexCursor, limit int) (int, store.IndexCursor, error) {
	plain, err := store.PlainUses(ctx, pool, cursor, limit)
	if err != nil || len(plain) == 0 {
		return 0, cursor, err
	}
	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		for _, u := range plain {
			if u.SubjectKeyID == nil || u.SubjectKeySealed == nil {
				continue // its flow moved or was erased meanwhile
			}
			key, err := subjectkey.Sealing(sealer, u.OrganizationID, *u.SubjectKeyID, u.SubjectKeySealed)
			if err != nil {
				return err
			}
			action, reference, err := useText(u, nil)
			if err != nil {
				return err
			}
			actionSealed, referenceSealed := key.SealUse(u.ID, action, reference)
			if err := store.SealUse(ctx, tx, u, key.ID, actionSealed, referenceSealed); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, cursor, err
	}
	last := plain[len(plain)-1]
	return len(plain), store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}, nil
}
