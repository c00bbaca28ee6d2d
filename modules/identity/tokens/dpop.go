package tokens

import (
	"context"
	"errors"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/dpopproof"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// confirmation is the cnf claim of a DPoP-bound access token (RFC 9449 6.1).
type confirmation struct {
	JKT string `json:"jkt"`
}

// spendDPoPProof accepts a proof's jti once per key across every instance:
// the insert into dpop_proofs decides, and this instance's memory of the
// proofs it saw spares the database an obvious replay. A replay is a
// *DPoPError.
func (s *Service) spendDPoPProof(ctx context.Context, p dpopproof.Proof) error {
	now := s.now()
	key := p.JKT + " " + p.JTI
	replay := dpopproof.BadProof("The DPoP proof was used before: make a new one for every request.")
	if _, seen := s.dpopSeen.Get(key); seen {
		return replay
	}
	// Past this, the proof's iat is out of the window wherever it is checked.
	expires := now.Add(dpopproof.MaxAge + dpopproof.MaxFuture)
	fresh, err := store.SpendDPoPProof(ctx, s.pool, p.JKT, p.JTI, expires)
	if err != nil {
		return database.Classify(err)
	}
	s.dpopSeen.PutUntil(key, struct{}{}, expires)
	if !fresh {
		return replay
	}
	return nil
}

// tokenDPoP checks a token request's proof (htm POST, htu the token
// endpoint) and returns its key's thumbprint, which binds the access token;
// empty when there is no proof, which a client required to use DPoP may not
// send. Failures are *TokenError values.
func (s *Service) tokenDPoP(ctx context.Context, c orgs.StoredClient, in DPoPRequest) (string, error) {
	if !in.Present() {
		if c.DPoPBound {
			// RFC 9449 5.2 names no code for the missing proof; the one
			// for a bad proof tells DPoP clients what to fix.
			return "", tokenErr(ErrCodeInvalidDPoPProof, "This client must send a DPoP proof with its token requests.")
		}
		return "", nil
	}
	p, err := s.dpop.Check(in, "")
	if err == nil {
		err = s.spendDPoPProof(ctx, p)
	}
	var de *DPoPError
	if errors.As(err, &de) {
		return "", &TokenError{Code: de.Code, Description: de.Description}
	}
	if err != nil {
		return "", err
	}
	return p.JKT, nil
}

// VerifyDPoPAccessToken implements Verifier. The proof is spent last, so that a
// request refused for its token does not use it up.
func (s *Service) VerifyDPoPAccessToken(ctx context.Context, raw string, in DPoPRequest) (identity.Principal, error) {
	v, err := s.verifyToken(ctx, raw)
	if err != nil {
		return identity.Principal{}, err
	}
	if v.jkt == "" {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, apperr.New(apperr.Unauthenticated, "The access token is not DPoP-bound: send it with the Bearer scheme.")
	}
	if !in.Present() {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, resourceDPoPErr(dpopproof.BadProof("A DPoP proof is required with the DPoP scheme."))
	}
	proof, err := s.dpop.Check(in, raw)
	if err != nil {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, resourceDPoPErr(err)
	}
	if proof.JKT != v.jkt {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, resourceDPoPErr(dpopproof.BadProof("The DPoP proof is signed by another key than the one the access token is bound to."))
	}
	var p identity.Principal
	if v.external {
		p, err = s.admitExternal(ctx, v)
	} else {
		p, err = s.admitBuiltin(ctx, v)
	}
	if err != nil {
		return identity.Principal{}, err
	}
	if err := s.spendDPoPProof(ctx, proof); err != nil {
		if de := (*DPoPError)(nil); errors.As(err, &de) {
			s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		}
		return identity.Principal{}, resourceDPoPErr(err)
	}
	return p, nil
}

// resourceDPoPErr makes a proof's failure an Unauthenticated error of an
// API request that keeps the DPoP error code for the challenge.
func resourceDPoPErr(err error) error {
	var de *DPoPError
	if !errors.As(err, &de) {
		return err
	}
	return &apperr.Error{Code: apperr.Unauthenticated, Message: de.Description, Err: de}
}

// DPoPNonce implements Verifier.
func (s *Service) DPoPNonce() string {
	if !s.cfg.DPoPNonceRequired {
		return ""
	}
	return s.dpop.Nonce()
}

// thumbprint returns the cnf's jkt, empty when there is no cnf.
func (c *confirmation) thumbprint() string {
	if c == nil {
		return ""
	}
	return c.JKT
}

// errDPoPBoundAsBearer refuses a DPoP-bound token sent with the Bearer
// scheme: without a proof it would be a bearer token after all.
var errDPoPBoundAsBearer = apperr.New(apperr.Unauthenticated, "The access token is DPoP-bound: send it with the DPoP scheme and a DPoP proof.")
