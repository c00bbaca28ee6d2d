// Package requests is the consent module's SQL for consent requests.
package requests

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/database"
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

const byFlowSQL = `select flow_id::text, organization_id, token_hash, pii_key_id, token_sealed
		from consent_requests where flow_id = $1`

// ByFlow returns a flow's request. ErrNoRows.
func ByFlow(ctx context.Context, db DB, flowID string) (Request, error) {
	return scan(db.QueryRow(ctx, byFlowSQL, flowID))
}

// errNotRead is what QueueByFlow's function answers when the read was not
// read to the request's statement, e.g. because an earlier statement failed.
var errNotRead = errors.New("requests: the read did not reach the consent request")

// QueueByFlow adds ByFlow's statement to r and returns the function that
// gives its answer once r is done. ErrNoRows. A flow without a request does
// not fail r.
func QueueByFlow(r database.SharedRead, flowID string) func() (Request, error) {
	var (
		req Request
		err = errNotRead
	)
	r.QueueRow(byFlowSQL, []any{flowID}, func(row database.Row) error {
		req, err = scan(row)
		return nil
	})
	return func() (Request, error) { return req, err }
}

// ByTokenHash returns the request of a link token's digest. ErrNoRows.
func ByTokenHash(ctx context.Context, db DB, hash []byte) (Request, error) {
	return scan(db.QueryRow(ctx, `select flow_id::text, organization_id, token_hash, pii_key_id, token_sealed
		from consent_requests where token_hash = $1`, hash))
}

func scan(row database.Row) (Request, error) {
	var r Request
	err := row.Scan(&r.FlowID, &r.OrganizationID, &r.TokenHash, &r.PIIKeyID, &r.TokenSealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNoRows
	}
	return r, err
}

// MarkProven records the first time the request's person proved who they are.
func MarkProven(ctx context.Context, db DB, flowID string) error {
	_, err := db.Exec(ctx, `update consent_requests set identity_proven_at = now()
		where flow_id = $1 and identity_proven_at is null`, flowID)
	return err
}

// ProvenAt returns when the request's person first proved who they are, or
// nil. ErrNoRows.
func ProvenAt(ctx context.Context, db DB, flowID string) (*time.Time, error) {
	var at *time.Time
	err := db.QueryRow(ctx, `select identity_proven_at from consent_requests where flow_id = $1`, flowID).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoRows
	}
	return at, err
}

// Delete removes a flow's request.
func Delete(ctx context.Context, db DB, flowID string) error {
	_, err := db.Exec(ctx, `delete from consent_requests where flow_id = $1`, flowID)
	return err
}

// Stale locks up to limit requests whose link token is sealed under a key
// other than keyID, skipping rows other transactions hold.
func Stale(ctx context.Context, db Querier, keyID string, limit int) ([]Request, error) {
	rows, err := db.Query(ctx, `select flow_id::text, organization_id, token_hash, pii_key_id, token_sealed
		from consent_requests where pii_key_id <> $1 order by flow_id limit $2 for update skip locked`, keyID, limit)
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

// Querier is a transaction that can also read many rows.
type Querier interface {
	DB
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Reseal stores a request's link token sealed again under keyID.
func Reseal(ctx context.Context, db DB, flowID, keyID string, sealed []byte) error {
	_, err := db.Exec(ctx, `update consent_requests set pii_key_id = $2, token_sealed = $3 where flow_id = $1`, flowID, keyID, sealed)
	return err
}
