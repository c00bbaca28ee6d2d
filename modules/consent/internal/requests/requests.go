// Package requests is the consent module's SQL for consent requests.
package requests

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Request is a row of consent_requests.
type Request struct {
	FlowID         string
	OrganizationID string
	TokenHash      []byte
	PIIKeyID       string
	TokenSealed    []byte
}

// Insert stores r.
func Insert(ctx context.Context, db database.Querier, r Request) error {
	_, err := db.Exec(ctx, `insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
		values ($1, $2, $3, $4, $5)`, r.FlowID, r.OrganizationID, r.TokenHash, r.PIIKeyID, r.TokenSealed)
	return err
}

const requestColumns = `flow_id::text, organization_id, token_hash, pii_key_id, token_sealed`

const byFlowSQL = `select ` + requestColumns + ` from consent_requests where organization_id = $1 and flow_id = $2`

// ByFlow returns a flow's request. database.ErrNotFound.
func ByFlow(ctx context.Context, db database.Querier, organizationID, flowID string) (Request, error) {
	return scan(db.QueryRow(ctx, byFlowSQL, organizationID, flowID))
}

// errNotRead is what QueueByFlow's function answers when the read was not
// read to the request's statement, e.g. because an earlier statement failed.
var errNotRead = errors.New("requests: the read did not reach the consent request")

// QueueByFlow adds ByFlow's statement to r and returns the function that
// gives its answer once r is done. database.ErrNotFound. A flow without a request does
// not fail r.
func QueueByFlow(r database.SharedRead, organizationID, flowID string) func() (Request, error) {
	var (
		req Request
		err = errNotRead
	)
	r.QueueRow(byFlowSQL, []any{organizationID, flowID}, func(row database.Row) error {
		req, err = scan(row)
		return nil
	})
	return func() (Request, error) { return req, err }
}

// ByTokenHash returns the request of an organization's link token's
// digest. database.ErrNotFound.
func ByTokenHash(ctx context.Context, db database.Querier, organizationID string, hash []byte) (Request, error) {
	return scan(db.QueryRow(ctx, `select `+requestColumns+` from consent_requests
		where organization_id = $1 and token_hash = $2`, organizationID, hash))
}

// ByLegacyTokenHash returns the request of the digest of a link token made
// before tokens named their organization. database.ErrNotFound. On Citus it asks every
// shard.
func ByLegacyTokenHash(ctx context.Context, db database.Querier, hash []byte) (Request, error) {
	return scan(db.QueryRow(ctx, `select `+requestColumns+` from consent_requests where token_hash = $1`, hash))
}

func scan(row database.Row) (Request, error) {
	var r Request
	err := row.Scan(&r.FlowID, &r.OrganizationID, &r.TokenHash, &r.PIIKeyID, &r.TokenSealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, database.ErrNotFound
	}
	return r, err
}

// MarkProven records the first time the request's person proved who they are.
func MarkProven(ctx context.Context, db database.Querier, organizationID, flowID string) error {
	_, err := db.Exec(ctx, `update consent_requests set identity_proven_at = now()
		where organization_id = $1 and flow_id = $2 and identity_proven_at is null`, organizationID, flowID)
	return err
}

// ProvenAt returns when the request's person first proved who they are, or
// nil. database.ErrNotFound.
func ProvenAt(ctx context.Context, db database.Querier, organizationID, flowID string) (*time.Time, error) {
	var at *time.Time
	err := db.QueryRow(ctx, `select identity_proven_at from consent_requests
		where organization_id = $1 and flow_id = $2`, organizationID, flowID).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, database.ErrNotFound
	}
	return at, err
}

// Delete removes a flow's request.
func Delete(ctx context.Context, db database.Querier, organizationID, flowID string) error {
	_, err := db.Exec(ctx, `delete from consent_requests where organization_id = $1 and flow_id = $2`, organizationID, flowID)
	return err
}

// Stale returns up to limit requests of every organization whose link token
// is sealed under a key other than keyID. Like the flows module's re-seal
// it locks nothing (a statement over every organization's rows cannot on
// Citus); Reseal writes a request back only while it is sealed as read.
func Stale(ctx context.Context, db database.Querier, keyID string, limit int) ([]Request, error) {
	rows, err := db.Query(ctx, `select `+requestColumns+`
		from consent_requests where pii_key_id <> $1 order by flow_id limit $2`, keyID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Request
	for rows.Next() {
		var r Request
		if err := rows.Scan(&r.FlowID, &r.OrganizationID, &r.TokenHash, &r.PIIKeyID, &r.TokenSealed); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Reseal stores r's link token sealed again under keyID, unless it is no
// longer sealed under r.PIIKeyID.
func Reseal(ctx context.Context, db database.Querier, r Request, keyID string, sealed []byte) error {
	_, err := db.Exec(ctx, `update consent_requests set pii_key_id = $4, token_sealed = $5
		where organization_id = $1 and flow_id = $2 and pii_key_id = $3`, r.OrganizationID, r.FlowID, r.PIIKeyID, keyID, sealed)
	return err
}
