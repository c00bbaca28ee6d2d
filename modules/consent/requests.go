package consent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/consent/internal/requests"
	"github.com/flowd/flowd/modules/flows"
)

// tokenBytes is the link token's length: 256 random bits, twice what an
// unguessable link needs.
const tokenBytes = 32

// Requests keeps each flow's consent request and its link. It implements
// flows.ConsentRequests. The link token is stored sealed, so that the API can
// show the link again, and as a SHA-256 digest for lookups when it is opened;
// whether the link still works depends on the flow's state, which the
// consent pages ask the flows module.
type Requests struct {
	pool    *pgxpool.Pool
	sealer  *pii.Sealer
	baseURL string
}

var _ flows.ConsentRequests = (*Requests)(nil)

// NewRequests returns the consent requests of flowd at baseURL (FLOWD_BASE_URL).
func NewRequests(pool *pgxpool.Pool, sealer *pii.Sealer, baseURL string) *Requests {
	return &Requests{pool: pool, sealer: sealer, baseURL: baseURL}
}

func tokenContext(flowID string) string { return "consent:" + flowID + ":token" }

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func (r *Requests) link(token string) string { return r.baseURL + "/consent/" + token }

// CreateTx implements flows.ConsentRequests.
func (r *Requests) CreateTx(ctx context.Context, tx database.Tx, organizationID, flowID string) (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	err := requests.Insert(ctx, tx, requests.Request{
		FlowID: flowID, OrganizationID: organizationID, TokenHash: tokenHash(token),
		PIIKeyID: r.sealer.KeyID(), TokenSealed: r.sealer.Seal(token, tokenContext(flowID)),
	})
	if err != nil {
		return "", fmt.Errorf("consent: create request: %w", err)
	}
	return r.link(token), nil
}

// URL returns the link of a flow's consent request, in a round trip of its
// own. ErrUnknownLink when the flow has no request.
func (r *Requests) URL(ctx context.Context, flowID string) (string, error) {
	if _, err := uuid.Parse(flowID); err != nil {
		return "", ErrUnknownLink
	}
	req, err := requests.ByFlow(ctx, r.pool, flowID)
	return r.opened(flowID, req, err)
}

// QueueURL implements flows.ConsentRequests. The token is opened only when
// the link is asked for, so a retrieve of a flow that is not the caller's
// decrypts nothing.
func (r *Requests) QueueURL(read database.SharedRead, flowID string) func() (string, error) {
	if _, err := uuid.Parse(flowID); err != nil {
		return func() (string, error) { return "", ErrUnknownLink }
	}
	request := requests.QueueByFlow(read, flowID)
	return func() (string, error) {
		req, err := request()
		return r.opened(flowID, req, err)
	}
}

// opened turns the read of a flow's request into its link.
func (r *Requests) opened(flowID string, req requests.Request, err error) (string, error) {
	if errors.Is(err, requests.ErrNoRows) {
		return "", ErrUnknownLink
	}
	if err != nil {
		return "", err
	}
	token, err := r.sealer.Open(req.PIIKeyID, req.TokenSealed, tokenContext(flowID))
	if err != nil {
		return "", fmt.Errorf("consent: link of %s: %w", flowID, err)
	}
	return r.link(token), nil
}

// DeleteTx implements flows.ConsentRequests.
func (r *Requests) DeleteTx(ctx context.Context, tx database.Tx, flowID string) error {
	return requests.Delete(ctx, tx, flowID)
}

var _ LinkStore = (*Requests)(nil)

// FlowIDForToken implements LinkStore. ErrUnknownLink. Whether the request
// is still open is the flow's state, which the flows module keeps.
func (r *Requests) FlowIDForToken(ctx context.Context, token string) (string, error) {
	if len(token) != base64.RawURLEncoding.EncodedLen(tokenBytes) {
		return "", ErrUnknownLink
	}
	req, err := requests.ByTokenHash(ctx, r.pool, tokenHash(token))
	if errors.Is(err, requests.ErrNoRows) {
		return "", ErrUnknownLink
	}
	if err != nil {
		return "", err
	}
	return req.FlowID, nil
}

// MarkIdentityProvenTx implements LinkStore.
func (r *Requests) MarkIdentityProvenTx(ctx context.Context, tx database.Tx, flowID string) error {
	return requests.MarkProven(ctx, tx, flowID)
}

// IdentityProvenAt implements LinkStore. ErrUnknownLink when the flow has no request.
func (r *Requests) IdentityProvenAt(ctx context.Context, flowID string) (*time.Time, error) {
	if _, err := uuid.Parse(flowID); err != nil {
		return nil, ErrUnknownLink
	}
	at, err := requests.ProvenAt(ctx, r.pool, flowID)
	if errors.Is(err, requests.ErrNoRows) {
		return nil, ErrUnknownLink
	}
	return at, err
}
