package identity

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/internal/keys"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// signerMaxAge is how long an instance signs with the keys it loaded before
// it looks again, in case it missed a rotation's notification.
const signerMaxAge = 30 * time.Second

// accessTokenAlgorithm signs access tokens.
const accessTokenAlgorithm = jose.ES256

// ReceiptAlgorithm signs consent receipts: ES256 is in every JOSE library,
// and its signatures are short enough for a receipt to travel in a page.
const ReceiptAlgorithm = jose.ES256

// receiptType is the typ header of consent receipts (RFC 8725 3.11): a
// receipt cannot be passed off as a token of another kind.
const receiptType = "consent-receipt+jwt"

// Purposes of signing keys. Token keys sign access and ID tokens and are
// trusted for the tokens' lifetime after a rotation; receipt keys sign
// consent receipts and stay published for as long as receipts may be checked.
const (
	purposeToken   = "token"
	purposeReceipt = "receipt"
)

// keyRole is what a signing key is for: one signs per role at a time.
type keyRole struct {
	purpose string
	alg     jose.SignatureAlgorithm
}

// keyRoles are every role flowd keeps a key for.
func keyRoles() []keyRole {
	roles := make([]keyRole, 0, len(keys.Algorithms)+1)
	for _, alg := range keys.Algorithms {
		roles = append(roles, keyRole{purposeToken, alg})
	}
	return append(roles, keyRole{purposeReceipt, ReceiptAlgorithm})
}

// IDTokenAlgorithms are the algorithms of the built-in provider's ID tokens,
// the default first: RS256, which every OpenID relying party accepts, and
// ES256 for the clients that ask for it.
var IDTokenAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// signerCache holds the keys that sign now, decrypted, by role.
type signerCache struct {
	mu     sync.Mutex
	active map[keyRole]activeKey
}

// activeKey is a key that signs now with its JOSE signers: a token key's
// for access tokens (typ at+jwt, RFC 9068) and ID tokens (typ JWT), a
// receipt key's for receipts.
type activeKey struct {
	kid      string
	access   jose.Signer
	id       jose.Signer
	receipt  jose.Signer
	loadedAt time.Time
}

func (c *signerCache) invalidate() {
	c.mu.Lock()
	c.active = nil
	c.mu.Unlock()
}

// activeKey returns the token key of alg that signs now.
func (m *Module) activeKey(ctx context.Context, alg jose.SignatureAlgorithm) (activeKey, error) {
	return m.activeKeyOf(ctx, m.pool, keyRole{purposeToken, alg})
}

// activeKeyOf returns the key of role that signs now, read through q,
// creating the first one when there is none (a new database, or one from
// before the role existed).
func (m *Module) activeKeyOf(ctx context.Context, q store.Querier, role keyRole) (activeKey, error) {
	c := &m.signer
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.active[role]; ok && time.Since(k.loadedAt) < signerMaxAge {
		return k, nil
	}
	if len(m.cfg.KeyEncryptionKey) != 32 {
		return activeKey{}, errors.New("identity: no key-encryption key: cannot sign tokens")
	}
	alg := role.alg
	row, err := store.ActiveSigningKey(ctx, q, role.purpose, string(alg))
	if errors.Is(err, store.ErrNotFound) {
		if _, err := m.rotate(ctx, false, role); err != nil {
			return activeKey{}, err
		}
		row, err = store.ActiveSigningKey(ctx, m.pool, role.purpose, string(alg))
	}
	if err != nil {
		return activeKey{}, database.Classify(err)
	}
	k, err := keys.Open(row.ID, alg, row.Sealed, m.cfg.KeyEncryptionKey)
	if err != nil {
		return activeKey{}, err
	}
	key := jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: k.Private, KeyID: k.ID}}
	active := activeKey{kid: k.ID, loadedAt: time.Now()}
	signers := map[*jose.Signer]string{&active.access: "at+jwt", &active.id: "JWT"}
	if role.purpose == purposeReceipt {
		signers = map[*jose.Signer]string{&active.receipt: receiptType}
	}
	for signer, typ := range signers {
		if *signer, err = jose.NewSigner(key, (&jose.SignerOptions{}).WithType(jose.ContentType(typ))); err != nil {
			return activeKey{}, err
		}
	}
	if c.active == nil {
		c.active = map[keyRole]activeKey{}
	}
	c.active[role] = active
	return active, nil
}

// SignReceiptTx signs a consent receipt's claims with the receipt key that
// signs now (consent.ReceiptSigner), reading it through the caller's tx
// when it is not cached: a decision needs no second connection.
func (m *Module) SignReceiptTx(ctx context.Context, tx database.Tx, claims []byte) (string, error) {
	k, err := m.activeKeyOf(ctx, tx, keyRole{purposeReceipt, ReceiptAlgorithm})
	if err != nil {
		return "", err
	}
	jws, err := k.receipt.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// ReceiptKeys returns the public keys that may have signed a receipt still
// within its retention (consent.ReceiptSigner): the active receipt key and
// those retired less than the retention ago.
func (m *Module) ReceiptKeys(ctx context.Context) (jose.JSONWebKeySet, error) {
	rows, err := store.PublishedKeys(ctx, m.pool, m.keyGrace(), m.cfg.ReceiptKeyRetention)
	if err != nil {
		return jose.JSONWebKeySet{}, database.Classify(err)
	}
	var set jose.JSONWebKeySet
	for _, r := range rows {
		if r.Purpose != purposeReceipt {
			continue
		}
		k, err := keys.ParsePublic(r.PublicJWK)
		if err != nil {
			return jose.JSONWebKeySet{}, fmt.Errorf("identity: receipt key %s: %w", r.ID, err)
		}
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// SignIDToken signs an ID token of the interactive login (login.Signer) with
// the active key of alg, one of IDTokenAlgorithms. The keys rotate with those
// of access tokens, so one JWKS verifies both.
func (m *Module) SignIDToken(ctx context.Context, alg jose.SignatureAlgorithm, claims any) (string, error) {
	if !slices.Contains(IDTokenAlgorithms, alg) {
		return "", fmt.Errorf("identity: ID tokens are not signed with %q", alg)
	}
	k, err := m.activeKey(ctx, alg)
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := k.id.Sign(payload)
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

// Prepare makes sure a signing key of every algorithm exists and that the
// key-encryption key opens it, so that a wrong FLOWD_KEY_ENCRYPTION_KEY stops
// serve at start-up with one line instead of failing every token request.
func (m *Module) Prepare(ctx context.Context) error {
	for _, role := range keyRoles() {
		if _, err := m.activeKeyOf(ctx, m.pool, role); err != nil {
			return fmt.Errorf("identity: %w (to start over with new signing keys under the current FLOWD_KEY_ENCRYPTION_KEY, run `flowd keys rotate`)", err)
		}
	}
	return nil
}

// RotateSigningKeys implements Provider.
func (m *Module) RotateSigningKeys(ctx context.Context) ([]SigningKey, error) {
	made, err := m.rotate(ctx, true, keyRoles()...)
	if err != nil {
		return nil, err
	}
	m.signer.invalidate()
	m.keys.invalidate()
	return made, nil
}

// rotate makes a new active key of each of roles. With force it retires the
// keys they replace; without, it only makes the keys of roles that have
// none, doing nothing for those another instance made meanwhile.
func (m *Module) rotate(ctx context.Context, force bool, roles ...keyRole) ([]SigningKey, error) {
	if len(m.cfg.KeyEncryptionKey) != 32 {
		return nil, errors.New("identity: FLOWD_KEY_ENCRYPTION_KEY is required to make signing keys")
	}
	// Keys are made before the transaction: an RSA key takes a while, and the
	// lock below holds up every other instance's rotation.
	fresh := make([]store.SigningKey, 0, len(roles))
	for _, role := range roles {
		k, err := keys.Generate(role.alg)
		if err != nil {
			return nil, err
		}
		if role.purpose == purposeReceipt {
			// The kid tells a reader of the JWKS which keys sign receipts.
			k.ID = "receipt-" + k.ID
		}
		pub, err := k.PublicJWK()
		if err != nil {
			return nil, err
		}
		sealed, err := k.Seal(m.cfg.KeyEncryptionKey)
		if err != nil {
			return nil, err
		}
		fresh = append(fresh, store.SigningKey{ID: k.ID, Purpose: role.purpose, Algorithm: string(role.alg), PublicJWK: pub, Sealed: sealed})
	}
	var made []SigningKey
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		made = made[:0]
		if err := store.LockSigningKeys(ctx, tx); err != nil {
			return err
		}
		for _, k := range fresh {
			if !force {
				if _, err := store.ActiveSigningKey(ctx, tx, k.Purpose, k.Algorithm); err == nil {
					continue
				} else if !errors.Is(err, store.ErrNotFound) {
					return err
				}
			}
			if err := store.RetireActiveKey(ctx, tx, k.Purpose, k.Algorithm); err != nil {
				return err
			}
			if err := store.InsertSigningKey(ctx, tx, k); err != nil {
				return err
			}
			made = append(made, SigningKey{ID: k.ID, Algorithm: k.Algorithm, Receipts: k.Purpose == purposeReceipt})
		}
		if len(made) == 0 {
			return nil
		}
		return store.Notify(ctx, tx, "keys")
	})
	if err != nil {
		return nil, database.Classify(err)
	}
	return made, nil
}

// JWKS implements Provider.
func (m *Module) JWKS(ctx context.Context) ([]byte, error) {
	rows, err := store.PublishedKeys(ctx, m.pool, m.keyGrace(), m.cfg.ReceiptKeyRetention)
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
		rows, err := store.PublishedKeys(ctx, m.pool, m.keyGrace(), m.cfg.ReceiptKeyRetention)
		if err != nil {
			return nil, database.Classify(err)
		}
		fresh := make(map[string]publicKey, len(rows))
		for _, r := range rows {
			if r.Purpose != purposeToken {
				continue // a receipt is never a token
			}
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
