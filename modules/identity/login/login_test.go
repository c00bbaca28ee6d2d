package login

import (
	"context"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/identity/staff"
)

// unusedSigner is a Signer for tests in which nothing is signed.
type unusedSigner struct{ t *testing.T }

func (s unusedSigner) SignIDToken(context.Context, jose.SignatureAlgorithm, any) (string, error) {
	s.t.Error("SignIDToken called")
	return "", nil
}

func (s unusedSigner) PublicJWKS(context.Context) (jose.JSONWebKeySet, error) {
	s.t.Error("PublicJWKS called")
	return jose.JSONWebKeySet{}, nil
}

// everyOrganization says that every organization exists.
type everyOrganization struct{}

func (everyOrganization) OrganizationExists(context.Context, string) (bool, error) { return true, nil }

// newAccounts returns the staff accounts of pool, for a provider to check.
func newAccounts(t *testing.T, pool *pgxpool.Pool) *staff.AccountService {
	t.Helper()
	accounts, err := staff.NewAccounts(pool, everyOrganization{}, staff.Config{PasswordParams: secrethash.Cheap})
	if err != nil {
		t.Fatal(err)
	}
	return accounts
}

func TestNewRefusesAClientWithAnIDTokenAlgorithmNotSigned(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	accounts := newAccounts(t, pool)
	key := make([]byte, 32)
	tests := []struct {
		alg jose.SignatureAlgorithm
		ok  bool
	}{{"", true}, {jose.RS256, true}, {jose.ES256, true}, {jose.HS256, false}, {"none", false}, {jose.PS256, false}}
	for _, tt := range tests {
		_, err := New(pool, unusedSigner{t}, accounts, Config{DataKey: key, Clients: []Client{{ID: "rp", IDTokenSignedResponseAlg: tt.alg}}})
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "rp")) {
			t.Errorf("client with %q: %v", tt.alg, err)
		}
	}
}

func TestConstructorsRefuseAMissingCollaborator(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	accounts := newAccounts(t, pool)
	key := make([]byte, 32)
	if _, err := New(nil, unusedSigner{t}, accounts, Config{DataKey: key}); err == nil {
		t.Error("New without a pool")
	}
	if _, err := New(pool, nil, accounts, Config{DataKey: key}); err == nil {
		t.Error("New without a Signer")
	}
	if _, err := New(pool, unusedSigner{t}, nil, Config{DataKey: key}); err == nil {
		t.Error("New without the staff accounts")
	}
}
