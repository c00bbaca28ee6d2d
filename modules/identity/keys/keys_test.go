package keys

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/identity/changes"
)

const testIssuer = "https://flowd.test"

// fixture is the signing keys of a fresh database.
type fixture struct {
	m *Service
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	pool := dbtest.New(t)
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	m, err := New(pool, changes.NewFeed(pool, nil), Config{KeyEncryptionKey: kek})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{m: m}
}

func kidOf(raw string) string {
	h, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	var v struct {
		Kid string `json:"kid"`
	}
	_ = json.Unmarshal(h, &v)
	return v.Kid
}

// TestRotationKeepsIDTokensVerifiable signs an ID token with each ID token
// algorithm, rotates, and checks that the JWKS still verifies the earlier
// tokens by their kid until the retired keys' grace has passed, while new
// tokens name the new keys.
func TestRotationKeepsIDTokensVerifiable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sign := func(alg jose.SignatureAlgorithm) string {
		t.Helper()
		raw, err := f.m.SignIDToken(ctx, alg, map[string]any{"iss": testIssuer, "sub": "someone", "aud": "rp"})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// verify checks raw against the published keys as a relying party would:
	// the key named by its kid, of the algorithm in its header.
	verify := func(raw string) error {
		jws, err := jose.ParseSignedCompact(raw, IDTokenAlgorithms)
		if err != nil {
			return err
		}
		set, err := f.m.PublicJWKS(ctx)
		if err != nil {
			return err
		}
		h := jws.Signatures[0].Header
		keys := set.Key(h.KeyID)
		if len(keys) != 1 || keys[0].Algorithm != h.Algorithm || keys[0].Use != "sig" {
			return fmt.Errorf("no published %s key %q", h.Algorithm, h.KeyID)
		}
		_, err = jws.Verify(keys[0])
		return err
	}
	before := map[jose.SignatureAlgorithm]string{}
	for _, alg := range IDTokenAlgorithms {
		before[alg] = sign(alg)
	}
	if _, err := f.m.RotateSigningKeys(ctx); err != nil {
		t.Fatal(err)
	}
	for _, alg := range IDTokenAlgorithms {
		after := sign(alg)
		if kidOf(after) == kidOf(before[alg]) {
			t.Fatalf("%s: the rotation did not change the signing key", alg)
		}
		for _, raw := range []string{before[alg], after} {
			if err := verify(raw); err != nil {
				t.Fatalf("%s ID token of key %s during the grace: %v", alg, kidOf(raw), err)
			}
		}
	}
	// Past the grace (the database's clock decides what the JWKS lists), the
	// retired keys are gone.
	if _, err := f.m.pool.Exec(ctx, "update signing_keys set retired_at = now() - interval '1 day' where retired_at is not null"); err != nil {
		t.Fatal(err)
	}
	for alg, raw := range before {
		if err := verify(raw); err == nil {
			t.Fatalf("%s ID token of a key retired longer ago than the grace still verifies", alg)
		}
	}
}
