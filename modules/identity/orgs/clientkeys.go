package orgs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/fieldcheck"
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
	MaxClientKeys = 10
	// MaxJWKSSize bounds a key set, inline or at a jwks_uri.
	MaxJWKSSize   = 64 << 10
	minRSAKeyBits = 2048
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
		if len(k.JWKS) > MaxJWKSSize {
			f.Add("jwks", "must be at most %d KiB", MaxJWKSSize>>10)
		} else if _, err := ParseJWKS(k.JWKS); err != nil {
			f.Add("jwks", "%v", err)
		}
	case k.JWKSURI != "":
		if err := CheckJWKSURI(k.JWKSURI, allowedHosts); err != nil {
			f.Add("jwksUri", "%v", err)
		}
	}
	return f.Err()
}

// CheckJWKSURI accepts an https URL on one of allowedHosts, as a client's
// jwks_uri is given and, with the hosts allowed then, fetched.
func CheckJWKSURI(raw string, allowedHosts []string) error {
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

// ParseJWKS reads a client's JSON Web Key Set, inline or fetched: public
// signing keys only, RSA of at least 2048 bits or EC P-256, at most MaxClientKeys of
// them, with distinct kids. Its errors name the offending key and are safe
// to show: they quote no key material.
func ParseJWKS(raw []byte) ([]jose.JSONWebKey, error) {
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

// parseClientJWK reads one key of a client's set (see ParseJWKS).
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
