package identity

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/internal/keys"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// signerMaxAge is how long an instance signs with the key it loaded before
// it looks again, in case it missed a rotation's notification.
const signerMaxAge = 30 * time.Second

// signerCache holds the key that signs now, decrypted, with its JOSE
// signers: one for access tokens (typ at+jwt, RFC 9068) and one for the ID
// tokens of the interactive login (typ JWT).
type signerCache struct {
	mu       sync.Mutex
	kid      string
	signer   jose.Signer
	idSigner jose.Signer
	loadedAt time.Time
}

func (c *signerCache) invalidate() {
	c.mu.Lock()
	c.signer = nil
	c.mu.Unlock()
}

// activeSigner returns the signer of the active key, creating the first key
// when there is none.
func (m *Module) activeSigner(ctx context.Context) (jose.Signer, error) {
	access, _, err := m.activeSigners(ctx)
	return access, err
}

// activeSigners returns the access-token and ID-token signers of the active key.
func (m *Module) activeSigners(ctx context.Context) (access, id jose.Signer, err error) {
	c := &m.signer
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.signer != nil && time.Since(c.loadedAt) < signerMaxAge {
		return c.signer, c.idSigner, nil
	}
	if len(m.cfg.KeyEncryptionKey) != 32 {
		return nil, nil, errors.New("identity: no key-encryption key: cannot sign tokens")
	}
	row, err := store.ActiveSigningKey(ctx, m.pool)
	if errors.Is(err, store.ErrNotFound) {
		if _, err := m.rotate(ctx, false); err != nil {
			return nil, nil, err
		}
		row, err = store.ActiveSigningKey(ctx, m.pool)
	}
	if err != nil {
		return nil, nil, database.Classify(err)
	}
	k, err := keys.Open(row.ID, row.Sealed, m.cfg.KeyEncryptionKey)
	if err != nil {
		return nil, nil, err
	}
	key := jose.SigningKey{Algorithm: keys.Algorithm, Key: jose.JSONWebKey{Key: k.Private, KeyID: k.ID}}
	access, err = jose.NewSigner(key, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, nil, err
	}
	id, err = jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, nil, err
	}
	c.kid, c.signer, c.idSigner, c.loadedAt = k.ID, access, id, time.Now()
	return access, id, nil
}

// Sign signs an ID token of the interactive login (login.Signer) with the
// same rotating key as access tokens, so one JWKS verifies both.
func (m *Module) Sign(ctx context.Context, claims any) (string, error) {
	_, signer, err := m.activeSigners(ctx)
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// PublicJWKS returns the published keys as a JOSE key set (login.Signer).
func (m *Module) PublicJWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	raw, err := m.JWKS(ctx)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	var set jose.JSONWebKeySet
	err = json.Unmarshal(raw, &set)
	return set, err
}

// Prepare makes sure a signing key exists and that the key-encryption key
// opens it, so that a wrong FLOWD_KEY_ENCRYPTION_KEY stops serve at start-up
// with one line instead of failing every token request.
func (m *Module) Prepare(ctx context.Context) error {
	if _, err := m.activeSigner(ctx); err != nil {
		return fmt.Errorf("identity: %w (to start over with a new signing key under the current FLOWD_KEY_ENCRYPTION_KEY, run `flowd keys rotate`)", err)
	}
	return nil
}

// RotateSigningKey implements Provider.
func (m *Module) RotateSigningKey(ctx context.Context) (string, error) {
	kid, err := m.rotate(ctx, true)
	if err != nil {
		return "", err
	}
	m.signer.invalidate()
	m.keys.invalidate()
	return kid, nil
}

// rotate makes a new active key. With force false it only makes the first
// key, doing nothing when another instance made one meanwhile.
func (m *Module) rotate(ctx context.Context, force bool) (string, error) {
	if len(m.cfg.KeyEncryptionKey) != 32 {
		return "", errors.New("identity: FLOWD_KEY_ENCRYPTION_KEY is required to make signing keys")
	}
	k, err := keys.Generate()
	if err != nil {
		return "", err
	}
	pub, err := k.PublicJWK()
	if err != nil {
		return "", err
	}
	sealed, err := k.Seal(m.cfg.KeyEncryptionKey)
	if err != nil {
		return "", err
	}
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if err := store.LockSigningKeys(ctx, tx); err != nil {
			return err
		}
		if !force {
			if _, err := store.ActiveSigningKey(ctx, tx); err == nil {
				return errKeyExists
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if err := store.RetireActiveKey(ctx, tx); err != nil {
			return err
		}
		if err := store.InsertSigningKey(ctx, tx, store.SigningKey{ID: k.ID, Algorithm: string(keys.Algorithm), PublicJWK: pub, Sealed: sealed}); err != nil {
			return err
		}
		return store.Notify(ctx, tx, "keys")
	})
	if errors.Is(err, errKeyExists) {
		return "", nil
	}
	if err != nil {
		return "", database.Classify(err)
	}
	return k.ID, nil
}

var errKeyExists = errors.New("a signing key exists")

// JWKS implements Provider.
func (m *Module) JWKS(ctx context.Context) ([]byte, error) {
	rows, err := store.PublishedKeys(ctx, m.pool, m.keyGrace())
	if err != nil {
		return nil, database.Classify(err)
	}
	set := struct {
		Keys []json.RawMessage `json:"keys"`
	}{Keys: []json.RawMessage{}}
	for _, r := range rows {
		set.Keys = append(set.Keys, r.PublicJWK)
	}
	return json.Marshal(set)
}

// keyCache holds the public keys that may have signed a valid token, by key id.
type keyCache struct {
	mu         sync.Mutex
	keys       map[string]publicKey
	loadedAt   time.Time
	lastMissAt time.Time
}

type publicKey struct {
	key       *ecdsa.PublicKey
	retiredAt *time.Time
}

// keyCacheMaxAge bounds how stale the key cache may be when no notification
// came (a missed rotation only matters once a retired key's grace has passed).
const keyCacheMaxAge = time.Minute

func (c *keyCache) init() { c.keys = map[string]publicKey{} }

func (c *keyCache) invalidate() {
	c.mu.Lock()
	c.loadedAt = time.Time{}
	c.mu.Unlock()
}

// publicKey returns the key with id kid if it may still verify tokens: the
// active key, or one retired less than keyGrace ago.
func (m *Module) publicKey(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
	c := &m.keys
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.keys[kid]
	stale := time.Since(c.loadedAt) > keyCacheMaxAge
	// An unknown key id reloads, but not more than five times a second, so
	// that tokens with made-up key ids cannot hammer the database.
	if stale || (!ok && time.Since(c.lastMissAt) > 200*time.Millisecond) {
		if !ok {
			c.lastMissAt = time.Now()
		}
		rows, err := store.PublishedKeys(ctx, m.pool, m.keyGrace())
		if err != nil {
			return nil, database.Classify(err)
		}
		fresh := make(map[string]publicKey, len(rows))
		for _, r := range rows {
			jwk, err := keys.ParsePublic(r.PublicJWK)
			if err != nil {
				m.log.Error("identity: unreadable signing key", "kid", r.ID, "error", err)
				continue
			}
			pub, ok := jwk.Key.(*ecdsa.PublicKey)
			if !ok {
				continue
			}
			fresh[r.ID] = publicKey{key: pub, retiredAt: r.RetiredAt}
		}
		c.keys, c.loadedAt = fresh, time.Now()
		k, ok = c.keys[kid]
	}
	if !ok {
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
	if k.retiredAt != nil && !m.now().Before(k.retiredAt.Add(m.keyGrace())) {
		return nil, fmt.Errorf("key %q was retired at %s", kid, k.retiredAt.Format(time.RFC3339))
	}
	return k.key, nil
}
