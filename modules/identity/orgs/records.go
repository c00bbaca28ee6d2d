package orgs

import (
	"context"
	"errors"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/orgs/internal/store"
)

// StoredClient implements ClientRecords.
func (s *Service) StoredClient(ctx context.Context, clientID string) (StoredClient, error) {
	row, err := store.GetClient(ctx, s.pool, clientID)
	if errors.Is(err, database.ErrNotFound) {
		return StoredClient{}, ErrClientNotFound
	}
	if err != nil {
		return StoredClient{}, database.Classify(err)
	}
	return StoredClient{Client: toClient(row), SecretHash: row.SecretHash, SecretMAC: row.SecretMAC}, nil
}

// ClientState implements ClientRecords: every API request with a built-in
// token asks, so the state is cached, that of a client not found too.
func (s *Service) ClientState(ctx context.Context, clientID string) (ClientState, bool, error) {
	st, err := s.states.Get(clientID, func() (clientState, bool, error) {
		row, err := store.GetClientState(ctx, s.pool, clientID)
		if errors.Is(err, database.ErrNotFound) {
			return clientState{}, true, nil
		}
		if err != nil {
			return clientState{}, false, database.Classify(err)
		}
		return clientState{ClientState: ClientState{OrganizationID: row.OrganizationID, Sandbox: row.Sandbox,
			Revoked: row.Revoked, RateLimit: toRateLimit(row.RateLimit)}, found: true}, true, nil
	})
	return st.ClientState, st.found, err
}

// ExternalClient implements ClientRecords. An unmapped client is cached
// too: MapExternalClient announces every new mapping.
func (s *Service) ExternalClient(ctx context.Context, issuer, clientID string) (ExternalClient, bool, error) {
	x, err := s.externals.Get(externalKey{issuer, clientID}, func() (externalClient, bool, error) {
		row, err := store.GetExternalClient(ctx, s.pool, issuer, clientID)
		if errors.Is(err, database.ErrNotFound) {
			return externalClient{}, true, nil
		}
		if err != nil {
			return externalClient{}, false, database.Classify(err)
		}
		return externalClient{ExternalClient: toExternal(row), found: true}, true, nil
	})
	return x.ExternalClient, x.found, err
}

// SetClientSecretMAC implements ClientRecords.
func (s *Service) SetClientSecretMAC(ctx context.Context, clientID, hash string, mac []byte) error {
	return database.Classify(store.SetClientSecretMAC(ctx, s.pool, clientID, hash, mac))
}

// TouchClient implements ClientRecords.
func (s *Service) TouchClient(ctx context.Context, clientID string) error {
	return database.Classify(store.TouchClient(ctx, s.pool, clientID))
}
