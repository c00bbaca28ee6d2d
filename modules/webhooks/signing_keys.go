package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
	"github.com/flowd/flowd/modules/webhooks/internal/signing"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// PublicKey is one of an organization's ed25519 public keys, with which a
// receiver verifies the v1a signatures of the endpoints that sign
// asymmetrically: the current key, or the previous one until ExpiresAt.
type PublicKey struct {
	// ID is the key's JWK thumbprint (RFC 7638), its JWKS kid.
	ID string
	// Key is "whpk_" and the base64 of the 32-byte key, as Standard
	// Webhooks libraries take it.
	Key string
	JWK JWK
	// ExpiresAt is when a previous key stops signing; nil for the current one.
	ExpiresAt *time.Time
}

// JWK is a public key as a JSON Web Key (RFC 8037, OKP and Ed25519).
type JWK struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	KeyID     string `json:"kid"`
	Use       string `json:"use"`
	Algorithm string `json:"alg"`
}

// PublicKeys returns the organization's public keys that sign now, current
// first. An organization without a key pair gets one, so that its
// receivers can fetch the key before the first asymmetric delivery.
func (m *Module) PublicKeys(ctx context.Context, organizationID string) ([]PublicKey, error) {
	keys, err := delivery.SigningKeys(ctx, m.pool, m.sealer, organizationID)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return publicKeys(keys)
}

// RotateSigningKey makes a new key pair the organization's current one; the
// previous keeps signing beside it for SigningOverlap, so that receivers
// that cached the published keys verify every delivery meanwhile. Rotating
// again within the overlap drops the oldest. before runs in the rotation's
// transaction with the keys published afterwards.
func (m *Module) RotateSigningKey(ctx context.Context, organizationID string, before ...database.BeforeCommit[[]PublicKey]) ([]PublicKey, error) {
	if _, err := m.PublicKeys(ctx, organizationID); err != nil {
		return nil, err
	}
	k := signing.NewKeyPair()
	var out []PublicKey
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		err := store.RotateSigningKey(ctx, tx, organizationID, store.SigningKey{
			Private: m.sealer.Seal(organizationID, k.Private), Public: k.Public, ID: k.ID}, SigningOverlap)
		if err != nil {
			return err
		}
		keys, err := store.GetSigningKeys(ctx, tx, organizationID)
		if err != nil {
			return err
		}
		if out, err = publicKeys(keys); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("webhooks: rotate signing key: %w", database.Classify(err))
	}
	return out, nil
}

func publicKeys(keys store.SigningKeys) ([]PublicKey, error) {
	out := make([]PublicKey, len(keys.Keys))
	for i, k := range keys.Keys {
		j, err := signing.PublicJWK(k.Public)
		if err != nil {
			return nil, err
		}
		out[i] = PublicKey{ID: k.ID, Key: k.Public, JWK: JWK(j)}
		if !k.Expires.IsZero() {
			exp := k.Expires
			out[i].ExpiresAt = &exp
		}
	}
	return out, nil
}
