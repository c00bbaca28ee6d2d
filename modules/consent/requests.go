package consent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/consent/internal/requests"
	"github.com/flowd/flowd/modules/flows"
)

// tokenBytes is the length of a link token's secret: 256 random bits,
// twice what an unguessable link needs.
const tokenBytes = 32

// maxToken bounds what is taken for a link token: a route and a secret.
const maxToken = 512

// A link token is "{route}.{secret}". The route names the flow's
// organization, so that the token's request is found among that
// organization's rows alone (on Citus, on its shard; docs/citus.md):
// "u" and the organization's UUID in 16 bytes or, for an id that is no
// UUID, "t" and the id's own bytes, in unpadded base64url. The digest that
// finds the request covers the whole token, so a route changed by hand finds
// nothing. Tokens made before routes are a secret alone; they are still
// found by their digest.

// newToken makes a link token of organizationID.
func newToken(organizationID string) (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	route := "t" + base64.RawURLEncoding.EncodeToString([]byte(organizationID))
	if u, err := uuid.Parse(organizationID); err == nil && u.String() == organizationID {
		route = "u" + base64.RawURLEncoding.EncodeToString(u[:])
	}
	return route + "." + base64.RawURLEncoding.EncodeToString(b), nil
}

// tokenOrganization returns the organization token names, "" for a token
// made before routes; ok is false when token cannot be a link token.
func tokenOrganization(token string) (organizationID string, ok bool) {
	if len(token) > maxToken {
		return "", false
	}
	route, secret, routed := strings.Cut(token, ".")
	if !routed {
		return "", len(token) == base64.RawURLEncoding.EncodedLen(tokenBytes)
	}
	if len(secret) != base64.RawURLEncoding.EncodedLen(tokenBytes) || len(route) < 2 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(route[1:])
	if err != nil {
		return "", false
	}
	switch route[0] {
	case 'u':
		u, err := uuid.FromBytes(b)
		return u.String(), err == nil
	case 't':
		return string(b), utf8.Valid(b)
	}
	return "", false
}

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
	token, err := newToken(organizationID)
	if err != nil {
		return "", err
	}
	err = requests.Insert(ctx, tx, requests.Request{
		FlowID: flowID, OrganizationID: organizationID, TokenHash: tokenHash(token),
		PIIKeyID: r.sealer.KeyID(), TokenSealed: r.sealer.Seal(token, tokenContext(flowID)),
	})
	if err != nil {
		return "", fmt.Errorf("consent: create request: %w", err)
	}
	return r.link(token), nil
}

// URL returns the link of an organization's flow's consent request, in a
// round trip of its own. ErrUnknownLink when the flow has no request.
func (r *Requests) URL(ctx context.Context, organizationID, flowID string) (string, error) {
	return r.url(ctx, r.pool, organizationID, flowID)
}

// URLTx implements LinkStore.
func (r *Requests) URLTx(ctx context.Context, tx database.Tx, f FlowRef) (string, error) {
	return r.url(ctx, tx, f.OrganizationID, f.FlowID)
}

// url reads the link of an organization's flow's consent request from db.
func (r *Requests) url(ctx context.Context, db database.Querier, organizationID, flowID string) (string, error) {
	if _, err := uuid.Parse(flowID); err != nil {
		return "", ErrUnknownLink
	}
	req, err := requests.ByFlow(ctx, db, organizationID, flowID)
	return r.opened(flowID, req, err)
}

// QueueURL implements flows.ConsentRequests. The token is opened only when
// the link is asked for, so a retrieve of a flow that is not the caller's
// decrypts nothing.
func (r *Requests) QueueURL(read database.SharedRead, organizationID, flowID string) func() (string, error) {
	if _, err := uuid.Parse(flowID); err != nil {
		return func() (string, error) { return "", ErrUnknownLink }
	}
	request := requests.QueueByFlow(read, organizationID, flowID)
	return func() (string, error) {
		req, err := request()
		return r.opened(flowID, req, err)
	}
}

// opened turns the read of a flow's request into its link.
func (r *Requests) opened(flowID string, req requests.Request, err error) (string, error) {
	if errors.Is(err, database.ErrNotFound) {
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
func (r *Requests) DeleteTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error {
	return requests.Delete(ctx, tx, organizationID, flowID)
}

var _ LinkStore = (*Requests)(nil)

// FlowForToken implements LinkStore. ErrUnknownLink. Whether the request
// is still open is the flow's state, which the flows module keeps.
func (r *Requests) FlowForToken(ctx context.Context, token string) (FlowRef, error) {
	organizationID, ok := tokenOrganization(token)
	if !ok {
		return FlowRef{}, ErrUnknownLink
	}
	var (
		req requests.Request
		err error
	)
	if organizationID == "" {
		req, err = requests.ByLegacyTokenHash(ctx, r.pool, tokenHash(token))
	} else {
		req, err = requests.ByTokenHash(ctx, r.pool, organizationID, tokenHash(token))
	}
	if errors.Is(err, database.ErrNotFound) {
		return FlowRef{}, ErrUnknownLink
	}
	if err != nil {
		return FlowRef{}, err
	}
	return FlowRef{OrganizationID: req.OrganizationID, FlowID: req.FlowID}, nil
}

// MarkIdentityProvenTx implements LinkStore.
func (r *Requests) MarkIdentityProvenTx(ctx context.Context, tx database.Tx, f FlowRef) error {
	return requests.MarkProven(ctx, tx, f.OrganizationID, f.FlowID)
}

// IdentityProvenAt implements LinkStore. ErrUnknownLink when the flow has no request.
func (r *Requests) IdentityProvenAt(ctx context.Context, f FlowRef) (*time.Time, error) {
	if _, err := uuid.Parse(f.FlowID); err != nil {
		return nil, ErrUnknownLink
	}
	at, err := requests.ProvenAt(ctx, r.pool, f.OrganizationID, f.FlowID)
	if errors.Is(err, database.ErrNotFound) {
		return nil, ErrUnknownLink
	}
	return at, err
}
