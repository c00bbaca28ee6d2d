// Package requests is the consent module's SQL for consent requests.
package requests

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoRows means there is no such consent request.
var ErrNoRows = errors.New("requests: no rows")

// DB is a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Request is a row of consent_requests.
type Request struct {
	FlowID         string
	OrganizationID string
	TokenHash      []byte
	PIIKeyID       string
	TokenSealed    []byte
}

// Insert stores r.
func Insert(ctx context.Context, db DB, r Request) error {
	_, err := db.Exec(ctx, `insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
		values ($1, $2, $3, $4, $5)`, r.FlowID, r.OrganizationID, r.TokenHash, r.PIIKeyID, r.TokenSealed)
	return err
}

// ByFlow returns a flow's request. ErrNoRows.
func ByFlow(ctx context.Context, db DB, flowID string) (Request, error) {
	return scan(db.QueryRow(ctx, `select flow_id::text, organization_id, token_hash, pii_key_id, token_sealed
		from consent_requests where flow_id = $1`, flowID))
}

// ByTokenHash returns the request of a link token's digest. ErrNoRows.
func ByTokenHash(ctx context.Context, db DB, hash []byte) (Request, error) {
	return scan(db.QueryRow(ctx, `select flow_id::text, organization_id, token_hash, pii_key_id, token_sealed
		from consent_requests where token_hash = $1`, hash))
}

func scan(row pgx.Row) (Request, error) {
	var r Request
	err := row.Scan(&r.FlowID, &r.OrganizationID, &r.TokenHash, &r.PIIKeyID, &r.TokenSealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNoRows
	}
	return r, err
}

// Delete removes a flow's request.
func Delete(ctx context.Context, db DB, flowID string) error {
	_, err := db.Exec(ctx, `delete from consent_requests where flow_id = $1`, flowID)
	return err
}
