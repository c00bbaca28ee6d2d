package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/payload"
	"github.com/flowd/flowd/modules/webhooks/internal/signing"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// bodyOf returns the body a delivery sends: the event's as stored, or its
// thin form when the delivery's endpoint asks for thin events.
func bodyOf(ev store.Event) ([]byte, error) {
	if ev.Payload == "thin" {
		return payload.ThinOf([]byte(ev.Body), ev.EventID)
	}
	return []byte(ev.Body), nil
}

// signature returns the webhook-signature header of a delivery of body
// sent at ts: the v1 signatures of the organization's secrets, the v1a
// signatures of its key pairs, or both while the endpoint moves from one
// to the other; the endpoint's own come first.
func (w *Worker) signature(ctx context.Context, ev store.Event, secrets []string, ts int64, body []byte) (string, error) {
	symmetric, asymmetric := signing.Schemes(ev.Signing, ev.SigningChangedAt, time.Now())
	var parts []string
	if symmetric {
		v1, err := signing.Sign(secrets, ev.EventID, ts, body)
		if err != nil {
			return "", err
		}
		parts = append(parts, v1)
	}
	if asymmetric {
		keys, err := SigningKeys(ctx, w.pool, w.sealer, ev.OrganizationID)
		if err != nil {
			return "", err
		}
		privates := make([]string, len(keys.Keys))
		for i, k := range keys.Keys {
			privates[i] = k.Private
		}
		v1a, err := signing.SignAsymmetric(privates, ev.EventID, ts, body)
		if err != nil {
			return "", err
		}
		if ev.Signing == "asymmetric" {
			parts = append([]string{v1a}, parts...)
		} else {
			parts = append(parts, v1a)
		}
	}
	return strings.Join(parts, " "), nil
}

// SigningKeys returns the organization's ed25519 key pairs that sign now,
// current first, with their private keys opened; an organization without
// one gets one.
func SigningKeys(ctx context.Context, pool *pgxpool.Pool, sealer *signing.Sealer, organizationID string) (store.SigningKeys, error) {
	keys, err := store.GetSigningKeys(ctx, pool, organizationID)
	if errors.Is(err, database.ErrNotFound) {
		k := signing.NewKeyPair()
		keys, err = store.InsertSigningKey(ctx, pool, organizationID, store.SigningKey{
			Private: sealer.Seal(organizationID, k.Private), Public: k.Public, ID: k.ID})
	}
	if err != nil {
		return store.SigningKeys{}, fmt.Errorf("signing keys: %w", database.Classify(err))
	}
	for i, k := range keys.Keys {
		if keys.Keys[i].Private, err = sealer.Open(organizationID, k.Private); err != nil {
			return store.SigningKeys{}, err
		}
	}
	return keys, nil
}
