package identity

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// ClientKeys are the public keys an API client signs its assertions with
// (private_key_jwt): a JSON Web Key Set given inline, or the https URL the
// client publishes it at. At most one of the two is set.
type ClientKeys struct {
	JWKS    []byte // a JSON Web Key Set of public keys
	JWKSURI string
}

// IsZero reports whether no keys are given.
func (k ClientKeys) IsZero() bool {
	return len(bytes.TrimSpace(k.JWKS)) == 0 && strings.TrimSpace(k.JWKSURI) == ""
}

// Limits of a client's key set.
const (
	MaxClientKeys    = 10
	minRSAKeyBits    = 2048
	jwksFetchTimeout = 5 * time.Second
	jwksBodyLimit    = 64 << 10
	jwksCacheTTL     = 5 * time.Minute
	// jwksRefetchEvery bounds the refetches an unknown kid forces, so that
	// assertions with made-up kids cannot make flowd hammer the client's host.
	jwksRefetchEvery = 30 * time.Second
)

// AssertionAlgorithms are the JWS algorithms a client assertion may be
// signed with: asymmetric only, so "none" and HS256 (with a public key as
// its secret) are refused.
var AssertionAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256}

// privateMembers are the JWK members that only a private or symmetric key has.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// Validate normalizes the keys and returns an apperr Invalid error naming
// the bad field (jwks or jwksUri). A jwks_uri must be https on one of
// allowedHosts; none is allowed when allowedHosts is empty.
func (k *ClientKeys) Validate(allowedHosts []string) error {
	var f apperr.Fields
	k.JWKS = bytes.TrimSpace(k.JWKS)
	k.JWKSURI = strings.TrimSpace(k.JWKSURI)
	switch {
	case len(k.JWKS) > 0 && k.JWKSURI != "":
		f.Add("jwksUri", "give the keys inline (jwks) or at a URL (jwksUri), not both")
	case len(k.JWKS) > 0:
		if len(k.JWKS) > jwksBodyLimit {
			f.Add("jwks", "must be at most %d KiB", jwksBodyLimit>>10)
		} else if _, err := parseClientJWKS(k.JWKS); err != nil {
			f.Add("jwks", "%v", err)
		}
	case k.JWKSURI != "":
		if err := checkJWKSURI(k.JWKSURI, allowedHosts); err != nil {
			f.Add("jwksUri", "%v", err)
		}
	}
	return f.Err()
}

// checkJWKSURI accepts an https URL on one of allowedHosts.
func checkJWKSURI(raw string, allowedHosts []string) error {
	if strings.ContainsFunc(raw, fieldcheck.IsControlOrFormat) {
		return errors.New(fieldcheck.ControlOrFormatMessage)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return errors.New("must be an absolute https URL")
	}
	if u.Scheme != "https" {
		return errors.New("must be an https URL")
	}
	if len(allowedHosts) == 0 {
		return errors.New("no jwks_uri host is allowed (FLOWD_CLIENT_JWKS_HOSTS is empty); give the keys inline")
	}
	if !slices.ContainsFunc(allowedHosts, func(h string) bool { return strings.EqualFold(h, u.Hostname()) }) {
		return fmt.Errorf("host %q is not in FLOWD_CLIENT_JWKS_HOSTS", u.Hostname())
	}
	return nil
}

// ContainsPrivateKey reports whether raw, meant as a client's public key
// set, holds private key material, which a refused form must not show back.
func ContainsPrivateKey(raw []byte) bool {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if json.Unmarshal(raw, &set) != nil {
		return bytes.Contains(raw, []byte(`"d"`))
	}
	for _, k := range set.Keys {
		for _, m := range privateMembers {
			if _, ok := k[m]; ok {
				return true
			}
		}
	}
	return false
}

// parseClientJWKS reads a client's JSON Web Key Set: public signing keys
// only, RSA of at least 2048 bits or EC P-256, at most MaxClientKeys of
// them, with distinct kids. Its errors name the offending key and are safe
// to show: they quote no key material.
func parseClientJWKS(raw []byte) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, errors.New(`must be a JSON Web Key Set: {"keys": [...]}`)
	}
	switch {
	case len(set.Keys) == 0:
		return nil, errors.New("must hold at least one key")
	case len(set.Keys) > MaxClientKeys:
		return nil, fmt.Errorf("must hold at most %d keys", MaxClientKeys)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for i, rawKey := range set.Keys {
		key, err := parseClientJWK(rawKey)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		if key.KeyID != "" && slices.ContainsFunc(keys, func(k jose.JSONWebKey) bool { return k.KeyID == key.KeyID }) {
			return nil, fmt.Errorf("key %d: kid %q is used by another key", i+1, key.KeyID)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// parseClientJWK reads one key of a client's set (see parseClientJWKS).
func parseClientJWK(raw json.RawMessage) (jose.JSONWebKey, error) {
	var members map[string]any
	if err := json.Unmarshal(raw, &members); err != nil {
		return jose.JSONWebKey{}, errors.New("is not a JSON object")
	}
	for _, m := range privateMembers {
		if _, ok := members[m]; ok {
			return jose.JSONWebKey{}, fmt.Errorf("has the private member %q: register the public key only", m)
		}
	}
	var key jose.JSONWebKey
	if err := key.UnmarshalJSON(raw); err != nil {
		return jose.JSONWebKey{}, errors.New("is not a valid JSON Web Key")
	}
	if key.Use != "" && key.Use != "sig" {
		return jose.JSONWebKey{}, fmt.Errorf(`has use %q; a client's key must sign ("sig")`, key.Use)
	}
	if key.Algorithm != "" && !slices.Contains(AssertionAlgorithms, jose.SignatureAlgorithm(key.Algorithm)) {
		return jose.JSONWebKey{}, fmt.Errorf("has alg %q; allowed are RS256, PS256 and ES256", key.Algorithm)
	}
	switch pub := key.Key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSAKeyBits {
			return jose.JSONWebKey{}, fmt.Errorf("is an RSA key of %d bits; at least %d are required", pub.N.BitLen(), minRSAKeyBits)
		}
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return jose.JSONWebKey{}, errors.New("is an EC key not on P-256")
		}
	default:
		return jose.JSONWebKey{}, errors.New("must be an RSA (2048 bits or more) or EC P-256 public key")
	}
	return key, nil
}

// jwksCache holds the key sets fetched from clients' jwks_uri, per client
// and URL, on this instance.
type jwksCache struct {
	mu      sync.Mutex
	entries map[string]*jwksEntry // by client id
}

type jwksEntry struct {
	uri       string
	keys      []jose.JSONWebKey
	fetchedAt time.Time
}

// clientKeySet returns the keys of a client: its inline set, or the set at
// its jwks_uri, fetched when not cached or when force is set (a kid the
// cached set lacks) and the set is older than jwksRefetchEvery. A fetch
// must first pass gate; a failure is returned as an error whose text names
// the reason, for the logs.
func (m *Module) clientKeySet(ctx context.Context, clientID string, keys ClientKeys, force bool, gate *costGate) ([]jose.JSONWebKey, error) {
	if len(keys.JWKS) > 0 {
		return parseClientJWKS(keys.JWKS)
	}
	if keys.JWKSURI == "" {
		return nil, errors.New("the client has no keys")
	}
	now := m.now()
	m.jwks.mu.Lock()
	e := m.jwks.entries[clientID]
	if e != nil && e.uri != keys.JWKSURI {
		e = nil
	}
	fresh := e != nil && now.Sub(e.fetchedAt) < jwksCacheTTL
	if fresh && (!force || now.Sub(e.fetchedAt) < jwksRefetchEvery) {
		out := e.keys
		m.jwks.mu.Unlock()
		return out, nil
	}
	m.jwks.mu.Unlock()

	if err := gate.enter(); err != nil {
		return nil, err
	}
	set, err := m.fetchJWKS(ctx, keys.JWKSURI)
	if err != nil {
		return nil, err
	}
	m.jwks.mu.Lock()
	defer m.jwks.mu.Unlock()
	if m.jwks.entries == nil {
		m.jwks.entries = map[string]*jwksEntry{}
	}
	m.jwks.entries[clientID] = &jwksEntry{uri: keys.JWKSURI, keys: set, fetchedAt: now}
	return set, nil
}

// forgetClientKeys drops a client's cached key set, after its keys were replaced.
func (m *Module) forgetClientKeys(clientID string) {
	m.jwks.mu.Lock()
	delete(m.jwks.entries, clientID)
	m.jwks.mu.Unlock()
}

// jwksClient returns the client that fetches jwks_uri: base (a plain client
// when nil) with its TLS settings kept, connecting only through the address
// guard of webhook deliveries unless allowPrivate, with no proxy from the
// environment (a proxy would hide the real destination from the guard), and
// following no redirects (they could lead off the allow-list).
func jwksClient(base *http.Client, allowPrivate bool) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	t, ok := c.Transport.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	t = t.Clone()
	t.Proxy = nil
	t.DialContext, t.DialTLSContext = netguard.NewDialer(jwksFetchTimeout, allowPrivate).DialContext, nil
	c.Transport = t
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// fetchJWKS gets a key set from a client's jwks_uri with the module's
// JWKS HTTP client (jwksClient): the host must still be allowed, and the
// answer must be a valid set within jwksBodyLimit, in jwksFetchTimeout.
func (m *Module) fetchJWKS(ctx context.Context, uri string) ([]jose.JSONWebKey, error) {
	if err := checkJWKSURI(uri, m.cfg.ClientJWKSHosts); err != nil {
		return nil, fmt.Errorf("jwks_uri %s: %w", uri, err)
	}
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := m.cfg.JWKSHTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching jwks_uri %s: %w", uri, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks_uri %s answered %s", uri, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksBodyLimit+1))
	if err != nil {
		return nil, fmt.Errorf("reading jwks_uri %s: %w", uri, err)
	}
	if len(body) > jwksBodyLimit {
		return nil, fmt.Errorf("jwks_uri %s: the key set is larger than %d KiB", uri, jwksBodyLimit>>10)
	}
	set, err := parseClientJWKS(body)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri %s: %w", uri, err)
	}
	return set, nil
}

// AuthMethods returns how the client may authenticate, in the words of
// token_endpoint_auth_methods_supported.
func (c Client) AuthMethods() []string {
	var out []string
	if c.HasSecret {
		out = append(out, AuthSecretBasic, AuthSecretPost)
	}
	if !c.Keys.IsZero() {
		out = append(out, AuthPrivateKeyJWT)
	}
	return out
}

// invalidFields joins the field errors of validations into one apperr
// Invalid error, so that a form shows every bad field at once; any other
// error is returned as it is.
func invalidFields(errs ...error) error {
	var fields apperr.Fields
	for _, err := range errs {
		if err == nil {
			continue
		}
		e, ok := apperr.As(err)
		if !ok || e.Code != apperr.Invalid {
			return err
		}
		fields = append(fields, e.Fields...)
	}
	return fields.Err()
}

// ReplaceClientKeys implements Clients. Replacing keys is routine rotation,
// not a sign of compromise: unlike a new secret it leaves the client's
// refresh tokens alone.
func (m *Module) ReplaceClientKeys(ctx context.Context, organizationID, clientID string, keys ClientKeys, before ...database.BeforeCommit[Client]) (Client, error) {
	keys.JWKS = bytes.Clone(keys.JWKS)
	if err := keys.Validate(m.cfg.ClientJWKSHosts); err != nil {
		return Client{}, err
	}
	if keys.IsZero() {
		return Client{}, apperr.InvalidFields([]apperr.FieldError{{Field: "jwks", Message: "give the new keys inline (jwks) or at a URL (jwksUri)"}})
	}
	var row store.Client
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.SetClientKeys(ctx, tx, organizationID, clientID, keys.JWKS, keys.JWKSURI)
		if err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toClient(row), before)
	})
	if errors.Is(err, store.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	m.forgetClientKeys(clientID)
	return toClient(row), nil
}

// ErrNoClientSecret refuses to rotate the secret of an assertion-only client:
// a rotation would give it a secret it was made without.
var ErrNoClientSecret = apperr.New(apperr.Conflict, "The client has no secret: it authenticates with private_key_jwt; replace its keys instead.")

// noSecretToRotate tells why a secret rotation found no client:
// ErrNoClientSecret for the organization's active assertion-only client,
// else ErrClientNotFound.
func (m *Module) noSecretToRotate(ctx context.Context, organizationID, clientID string) error {
	c, err := store.GetClient(ctx, m.pool, clientID)
	if err == nil && c.OrganizationID == organizationID && c.RevokedAt == nil && c.SecretHash == "" {
		return ErrNoClientSecret
	}
	return ErrClientNotFound
}
