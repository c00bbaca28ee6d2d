package tokens

import (
	"cmp"
	"context"
	"errors"
	"strings"

	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/windowlimit"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/costlimit"
)

// authenticateClient checks the client's credentials, a secret or a client
// assertion (private_key_jwt). Failures are not counted per client, so that
// no one can lock a client out by failing in its name; only the costly
// checks (argon2id of a secret without a MAC, a fetch of the client's
// jwks_uri) are bounded, per client and source address together, and
// answer slow_down (429) when that client has failed too often from that
// address: failures naming other clients, from behind the same load
// balancer say, never hold a client's correct credentials up, and a
// secret's first success gives it the MAC that takes it off the costly
// path for good.
func (s *Service) authenticateClient(ctx context.Context, req ClientAuth) (orgs.StoredClient, error) {
	req, refused, terr := assertionAuth(req)
	if terr != nil {
		return orgs.StoredClient{}, terr
	}
	if refused == nil && (req.ClientID == "" || (req.ClientSecret == "" && req.AuthMethod != identity.AuthPrivateKeyJWT)) {
		return orgs.StoredClient{}, &TokenError{Code: ErrCodeInvalidClient, AuthMethod: req.AuthMethod,
			Description: "Client authentication is required: client_id and client_secret in the body, HTTP Basic, or a client assertion."}
	}
	gate := &costGate{limiter: s.limiter, key: costlimit.Key(req.ClientID, req.RemoteAddr)}
	c, err := s.checkClient(ctx, req, refused, gate)
	var f *authFailure
	gate.done(errors.As(err, &f))
	switch {
	case f != nil:
		s.log.InfoContext(ctx, "identity: client authentication failed", "client_id", loggableID(req.ClientID),
			"remote_addr", req.RemoteAddr, "method", req.AuthMethod, "reason", cmp.Or(f.reason, f.description))
		return orgs.StoredClient{}, &TokenError{Code: ErrCodeInvalidClient, AuthMethod: req.AuthMethod, Description: f.description}
	case errors.As(err, &terr) && terr.Code == ErrCodeSlowDown:
		s.log.WarnContext(ctx, "identity: costly client authentication refused after repeated failures from the address",
			"client_id", loggableID(req.ClientID), "remote_addr", req.RemoteAddr, "method", req.AuthMethod, "retry_after", terr.RetryAfter.String())
	}
	return c, err
}

// checkClient finds the client and checks its credentials; a refusal is an
// *authFailure.
func (s *Service) checkClient(ctx context.Context, req ClientAuth, refused *authFailure, gate *costGate) (orgs.StoredClient, error) {
	if refused != nil {
		return orgs.StoredClient{}, refused
	}
	failed := refuse("Client authentication failed.")
	if len(req.ClientID) > 128 || len(req.ClientSecret) > 512 {
		return orgs.StoredClient{}, failed
	}
	c, err := s.clients.StoredClient(ctx, req.ClientID)
	if errors.Is(err, orgs.ErrClientNotFound) {
		return orgs.StoredClient{}, failed
	}
	if err != nil {
		return orgs.StoredClient{}, err
	}
	if c.RevokedAt != nil {
		return orgs.StoredClient{}, failed
	}
	if req.AuthMethod == identity.AuthPrivateKeyJWT {
		err = s.checkAssertion(ctx, c, req.ClientAssertion, gate)
	} else {
		err = s.checkSecret(ctx, c, req.ClientSecret, gate)
	}
	if err != nil {
		return orgs.StoredClient{}, err
	}
	return c, nil
}

// loggableID shortens a client id as given for the logs, and hides it when
// it looks like a secret pasted into the wrong field.
func loggableID(id string) string {
	if strings.HasPrefix(id, "fcs_") || strings.HasPrefix(id, "frt_") {
		return "[a secret, not logged]"
	}
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// checkSecret checks a client secret. A current MAC decides at the cost of
// two HMACs. Without one (a secret stored before MACs, or by a command run
// without the key) the argon2id hash decides, on the costly path that gate
// bounds per address, and a match stores the MAC, so that the client pays
// argon2id once. An assertion-only client has no secret: any secret fails
// like a wrong one.
func (s *Service) checkSecret(ctx context.Context, c orgs.StoredClient, secret string, gate *costGate) error {
	if c.SecretHash == "" {
		return refuse("Client authentication failed.")
	}
	if s.macs.Current(c.SecretMAC, c.SecretHash) {
		if !s.macs.Matches(c.SecretMAC, secret) {
			return refuse("Client authentication failed.")
		}
		return nil
	}
	if err := gate.enter(); err != nil {
		return err
	}
	select {
	case s.hashing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	ok, err := secrethash.Verify(secret, c.SecretHash)
	<-s.hashing
	if err != nil {
		return err
	}
	if !ok {
		return refuse("Client authentication failed.")
	}
	if mac := s.macs.Make(c.SecretHash, secret); mac != nil {
		if err := s.clients.SetClientSecretMAC(ctx, c.ID, c.SecretHash, mac); err != nil {
			// The secret is right; the MAC is stored at its next use.
			s.log.WarnContext(ctx, "identity: storing a client secret's MAC", "client_id", c.ID, "error", err)
		}
	}
	return nil
}

// costGate lets one client authentication onto the costly path, taking a
// slot of its client and address the first time it is asked.
type costGate struct {
	limiter *windowlimit.Limiter
	key     string
	entered bool
}

// enter takes the client and address's slot, or answers slow_down with how
// long to wait.
func (g *costGate) enter() error {
	if g.entered {
		return nil
	}
	if wait, ok := g.limiter.Take(g.key); !ok {
		return &TokenError{Code: ErrCodeSlowDown, RetryAfter: wait,
			Description: "Too many failed authentications of this client from this address; try again later."}
	}
	g.entered = true
	return nil
}

// done gives the slot back unless the authentication failed after taking it.
func (g *costGate) done(failed bool) {
	if g.entered && !failed {
		g.limiter.GiveBack(g.key)
	}
}
