package keys

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/keys/internal/keygen"
	"github.com/flowd/flowd/modules/identity/keys/internal/store"
)

// Config is what the keys need to know; the wiring (cmd/flowd) fills it from
// internal/config.
type Config struct {
	// KeyEncryptionKey seals the private keys; required to sign or rotate.
	KeyEncryptionKey []byte
	// AccessTokenTTL is the lifetime of the access tokens a key signs, for
	// which a retired key stays trusted; zero means identity.AccessTokenTTL.
	AccessTokenTTL time.Duration
	// ReceiptKeyRetention is how long a retired receipt key stays published,
	// so that the receipts it signed can still be checked
	// (FLOWD_RECEIPT_KEY_RETENTION); zero means DefaultReceiptKeyRetention.
	ReceiptKeyRetention time.Duration
	Log                 *slog.Logger
	// Registry, when set, receives the count of signatures made and failed
	// (flowd_signatures_total).
	Registry prometheus.Registerer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Service keeps the signing keys (Tokens, Publisher, Receipts, Rotation). It copies
// the keys in use into memory and drops its copies when a rotation is
// announced on the feed, or after signerMaxAge and keyCacheMaxAge in case
// an announcement was missed.
type Service struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	now  func() time.Time

	signers    signerCache
	public     keyCache
	signatures signatures
}

var (
	_ Tokens    = (*Service)(nil)
	_ Publisher = (*Service)(nil)
	_ Receipts  = (*Service)(nil)
	_ Rotation  = (*Service)(nil)
)

// New returns the signing keys on pool, kept current through feed. It does
// not touch the database.
func New(pool *pgxpool.Pool, feed *changes.Feed, cfg Config) (*Service, error) {
	if pool == nil || feed == nil {
		return nil, errors.New("keys: New needs a pool and the change feed")
	}
	if cfg.AccessTokenTTL == 0 {
		cfg.AccessTokenTTL = identity.AccessTokenTTL
	}
	if cfg.ReceiptKeyRetention <= 0 {
		cfg.ReceiptKeyRetention = DefaultReceiptKeyRetention
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{pool: pool, cfg: cfg, log: cfg.Log, now: cfg.Now, signatures: newSignatures(cfg.Registry)}
	s.public.init()
	feed.Subscribe(changes.TopicKeys, func(string) { s.forget() })
	feed.OnListen(func(context.Context) error { s.forget(); return nil })
	return s, nil
}

// forget drops the keys copied into memory, so that the next use reads them again.
func (s *Service) forget() {
	s.signers.invalidate()
	s.public.invalidate()
}

// signerMaxAge is how long an instance signs with the keys it loaded before
// it looks again, in case it missed a rotation's announcement.
const signerMaxAge = 30 * time.Second

// Grace is how long a retired token key stays published and trusted: the
// lifetime of the tokens it signed, plus the time other instances may take
// to notice the rotation, plus clock skew.
func (s *Service) Grace() time.Duration { return s.cfg.AccessTokenTTL + signerMaxAge + time.Minute }

// ReceiptTypes are the typ headers (RFC 8725 3.11) of the receipts a
// receipt key signs, one per kind, so that no receipt can be passed off as
// a token or as a receipt of another kind. The Shared Signals' Security
// Event Tokens (secevent+jwt) are signed by the receipt key too: it is
// published at the jwks_uri for as long as a SET may be checked.
var ReceiptTypes = []string{"consent-receipt+jwt", "erasure-receipt+jwt", "secevent+jwt"}

// TokenTypes are the typ headers, besides at+jwt and JWT, of what a token
// key signs: consent tokens, which a data holder tells apart from flowd's
// own access tokens by their typ, and signed introspection answers (RFC
// 9701).
var TokenTypes = []string{ConsentTokenType, IntrospectionType}

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
	roles := make([]keyRole, 0, len(keygen.Algorithms)+1)
	for _, alg := range keygen.Algorithms {
		roles = append(roles, keyRole{purposeToken, alg})
	}
	return append(roles, keyRole{purposeReceipt, ReceiptAlgorithm})
}

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
	receipts map[string]jose.Signer // by typ
	typed    map[string]jose.Signer // a token key's, by one of TokenTypes
	loadedAt time.Time
}

func (c *signerCache) invalidate() {
	c.mu.Lock()
	c.active = nil
	c.mu.Unlock()
}

// activeKey returns the token key of alg that signs now.
func (s *Service) activeKey(ctx context.Context, alg jose.SignatureAlgorithm) (activeKey, error) {
	return s.activeKeyOf(ctx, s.pool, keyRole{purposeToken, alg})
}

// activeKeyOf returns the key of role that signs now, read through q,
// creating the first one when there is none (a new database, or one from
// before the role existed).
func (s *Service) activeKeyOf(ctx context.Context, q database.Querier, role keyRole) (activeKey, error) {
	c := &s.signers
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.active[role]; ok && time.Since(k.loadedAt) < signerMaxAge {
		return k, nil
	}
	if len(s.cfg.KeyEncryptionKey) != 32 {
		return activeKey{}, errors.New("identity: no key-encryption key: cannot sign tokens")
	}
	alg := role.alg
	row, err := store.ActiveSigningKey(ctx, q, role.purpose, string(alg))
	if errors.Is(err, database.ErrNotFound) {
		if _, err := s.rotate(ctx, false, role); err != nil {
			return activeKey{}, err
		}
		row, err = store.ActiveSigningKey(ctx, s.pool, role.purpose, string(alg))
	}
	if err != nil {
		return activeKey{}, database.Classify(err)
	}
	k, err := keygen.Open(row.ID, alg, row.Sealed, s.cfg.KeyEncryptionKey)
	if err != nil {
		return activeKey{}, err
	}
	key := jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: k.Private, KeyID: k.ID}}
	active := activeKey{kid: k.ID, loadedAt: time.Now()}
	signers := map[*jose.Signer]string{&active.access: "at+jwt", &active.id: "JWT"}
	if role.purpose == purposeToken {
		active.typed = map[string]jose.Signer{}
		for _, typ := range TokenTypes {
			var signer jose.Signer
			if signer, err = jose.NewSigner(key, (&jose.SignerOptions{}).WithType(jose.ContentType(typ))); err != nil {
				return activeKey{}, err
			}
			active.typed[typ] = signer
		}
	}
	if role.purpose == purposeReceipt {
		signers = map[*jose.Signer]string{}
		active.receipts = map[string]jose.Signer{}
		for _, typ := range ReceiptTypes {
			var signer jose.Signer
			if signer, err = jose.NewSigner(key, (&jose.SignerOptions{}).WithType(jose.ContentType(typ))); err != nil {
				return activeKey{}, err
			}
			active.receipts[typ] = signer
		}
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

// SignAccessToken implements Tokens.
func (s *Service) SignAccessToken(ctx context.Context, claims []byte) (_ string, err error) {
	defer func() { s.signatures.count(useAccessToken, err) }()
	k, err := s.activeKey(ctx, AccessTokenAlgorithm)
	if err != nil {
		return "", err
	}
	jws, err := k.access.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// SignTypedToken implements Tokens.
func (s *Service) SignTypedToken(ctx context.Context, typ string, claims []byte) (_ string, err error) {
	defer func() { s.signatures.count(useAccessToken, err) }()
	k, err := s.activeKey(ctx, AccessTokenAlgorithm)
	if err != nil {
		return "", err
	}
	signer, ok := k.typed[typ]
	if !ok {
		return "", fmt.Errorf("identity: no tokens of type %q are signed", typ)
	}
	jws, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// SignReceiptTx implements Receipts: a decision needs no second connection.
func (s *Service) SignReceiptTx(ctx context.Context, tx database.Tx, typ string, claims []byte) (_ string, err error) {
	defer func() { s.signatures.count(useReceipt, err) }()
	k, err := s.activeKeyOf(ctx, tx, keyRole{purposeReceipt, ReceiptAlgorithm})
	if err != nil {
		return "", err
	}
	signer, ok := k.receipts[typ]
	if !ok {
		return "", fmt.Errorf("identity: no receipts of type %q are signed", typ)
	}
	jws, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// ReceiptKeys implements Receipts: the active receipt key and those retired
// less than the retention ago.
func (s *Service) ReceiptKeys(ctx context.Context) (jose.JSONWebKeySet, error) {
	rows, err := store.PublishedKeys(ctx, s.pool, s.Grace(), s.cfg.ReceiptKeyRetention)
	if err != nil {
		return jose.JSONWebKeySet{}, database.Classify(err)
	}
	var set jose.JSONWebKeySet
	for _, r := range rows {
		if r.Purpose != purposeReceipt {
			continue
		}
		k, err := keygen.ParsePublic(r.PublicJWK)
		if err != nil {
			return jose.JSONWebKeySet{}, fmt.Errorf("identity: receipt key %s: %w", r.ID, err)
		}
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// SignIDToken implements Tokens. The keys rotate with those of access
// tokens, so one JWKS verifies both.
func (s *Service) SignIDToken(ctx context.Context, alg jose.SignatureAlgorithm, claims any) (_ string, err error) {
	defer func() { s.signatures.count(useIDToken, err) }()
	if !slices.Contains(IDTokenAlgorithms, alg) {
		return "", fmt.Errorf("identity: ID tokens are not signed with %q", alg)
	}
	k, err := s.activeKey(ctx, alg)
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

// PublicJWKS implements Tokens.
func (s *Service) PublicJWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	raw, err := s.JWKS(ctx)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	var set jose.JSONWebKeySet
	err = json.Unmarshal(raw, &set)
	return set, err
}

// Prepare implements Rotation.
func (s *Service) Prepare(ctx context.Context) error {
	for _, role := range keyRoles() {
		if _, err := s.activeKeyOf(ctx, s.pool, role); err != nil {
			return fmt.Errorf("identity: %w (to start over with new signing keys under the current FLOWD_KEY_ENCRYPTION_KEY, run `flowd keys rotate`)", err)
		}
	}
	return nil
}

// RotateSigningKeys implements Rotation.
func (s *Service) RotateSigningKeys(ctx context.Context) ([]SigningKey, error) {
	made, err := s.rotate(ctx, true, keyRoles()...)
	if err != nil {
		return nil, err
	}
	s.forget()
	return made, nil
}

// rotate makes a new active key of each of roles. With force it retires the
// keys they replace; without, it only makes the keys of roles that have
// none, doing nothing for those another instance made meanwhile.
func (s *Service) rotate(ctx context.Context, force bool, roles ...keyRole) ([]SigningKey, error) {
	if len(s.cfg.KeyEncryptionKey) != 32 {
		return nil, errors.New("identity: FLOWD_KEY_ENCRYPTION_KEY is required to make signing keys")
	}
	// Keys are made before the transaction: an RSA key takes a while, and the
	// lock below holds up every other instance's rotation.
	fresh := make([]store.SigningKey, 0, len(roles))
	for _, role := range roles {
		k, err := keygen.Generate(role.alg)
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
		sealed, err := k.Seal(s.cfg.KeyEncryptionKey)
		if err != nil {
			return nil, err
		}
		fresh = append(fresh, store.SigningKey{ID: k.ID, Purpose: role.purpose, Algorithm: string(role.alg), PublicJWK: pub, Sealed: sealed})
	}
	var made []SigningKey
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		made = made[:0]
		if err := store.LockSigningKeys(ctx, tx); err != nil {
			return err
		}
		for _, k := range fresh {
			if !force {
				if _, err := store.ActiveSigningKey(ctx, tx, k.Purpose, k.Algorithm); err == nil {
					continue
				} else if !errors.Is(err, database.ErrNotFound) {
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
		return changes.Notify(ctx, tx, changes.TopicKeys, "")
	})
	if err != nil {
		return nil, database.Classify(err)
	}
	return made, nil
}

// JWKS implements Publisher.
func (s *Service) JWKS(ctx context.Context) ([]byte, error) {
	rows, err := store.PublishedKeys(ctx, s.pool, s.Grace(), s.cfg.ReceiptKeyRetention)
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

// keyCacheMaxAge bounds how stale the key cache may be when no announcement
// came (a missed rotation only matters once a retired key's grace has passed).
const keyCacheMaxAge = time.Minute

func (c *keyCache) init() { c.keys = map[string]publicKey{} }

func (c *keyCache) invalidate() {
	c.mu.Lock()
	c.loadedAt = time.Time{}
	c.mu.Unlock()
}

// AccessTokenKey implements Tokens.
func (s *Service) AccessTokenKey(ctx context.Context, kid string) (*ecdsa.PublicKey, error) {
	c := &s.public
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
		rows, err := store.PublishedKeys(ctx, s.pool, s.Grace(), s.cfg.ReceiptKeyRetention)
		if err != nil {
			return nil, database.Classify(err)
		}
		fresh := make(map[string]publicKey, len(rows))
		for _, r := range rows {
			if r.Purpose != purposeToken {
				continue // a receipt is never a token
			}
			jwk, err := keygen.ParsePublic(r.PublicJWK)
			if err != nil {
				s.log.ErrorContext(ctx, "identity: unreadable signing key", "kid", r.ID, "error", err)
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
	if k.retiredAt != nil && !s.now().Before(k.retiredAt.Add(s.Grace())) {
		return nil, fmt.Errorf("key %q was retired at %s", kid, k.retiredAt.Format(time.RFC3339))
	}
	return k.key, nil
}
