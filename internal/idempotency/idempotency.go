// Package idempotency keeps the API's answers to requests that carry an
// Idempotency-Key, so that a client may retry a POST without its effect
// happening twice: the same key with the same request within 24 hours gets
// the first answer again; with another request it is refused.
//
// An answer is kept in the transaction of the change it answers (KeepTx, run
// as a database.BeforeCommit hook of the module's write), so that the change
// and its answer commit together or not at all, and only a success is kept:
// a request that failed changed nothing and leaves its key free. Keys belong
// to an organization; the request they were first used with (the client, the
// method, the path and query, the body) is kept as a keyed hash, since a body
// may hold a national id, and the answer's body is sealed under the data key
// and bound to its row, since it may show one. Every POST keeps its answers
// here, flow creation's too; the keys of creates made before the migration
// one_idempotency_store were carried over from the flows module's table
// and are read as carried.go says until they expire.
package idempotency

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
)

// Limits of the Idempotency-Key header, the same for every POST of the API.
const (
	// MaxKey is the longest key accepted, in bytes.
	MaxKey = 255
	// TTL is how long a key and its answer are kept.
	TTL = 24 * time.Hour
)

// Errors of Lookup and KeepTx.
var (
	// ErrNotFound: no unexpired answer is kept for the key.
	ErrNotFound = errors.New("idempotency: no answer kept for this key")
	// ErrTaken: another request kept an answer for the key first; the
	// change KeepTx was to answer must not commit.
	ErrTaken = errors.New("idempotency: another request kept an answer for this key first")
)

// MismatchError says that a key was first used with another request.
type MismatchError struct {
	Method, Path string // the request it was first used with
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idempotency: the key was first used with another request (%s %s)", e.Method, e.Path)
}

// Request is a request that carries a key: who sent it and what it asked.
type Request struct {
	OrganizationID string
	ClientID       string
	Key            string
	Method         string
	// Path is the request's path with its query, if any.
	Path string
	// Body is the request's body, in a canonical form when it is JSON, so
	// that a retry that encodes the same members differently still matches.
	Body []byte
	// Carried reads the rows carried over for this operation (see
	// Carried); nil for an operation that has none, whose request is then
	// never the one such a row holds.
	Carried Carried
}

// Answer is what a request was answered: its status, the headers a replay
// repeats (Content-Type, Location, ETag) and its body.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	// FlowID names the flow the answer shows, if any: the flow's deletion
	// forgets the answer with it (ForgetFlowTx).
	FlowID string
}

// Store keeps the answers. Keys implements it on PostgreSQL.
type Store interface {
	// Lookup returns the answer kept for r's key. ErrNotFound, or a
	// *MismatchError when the key was first used with another request.
	Lookup(ctx context.Context, r Request) (Answer, error)
	// KeepTx keeps a as the answer to r in tx, the transaction of the
	// change it answers. ErrTaken when an unexpired answer holds the key.
	KeepTx(ctx context.Context, tx database.Tx, r Request, a Answer) error
	// Keep keeps a as the answer to r on its own, for a request that
	// changed nothing. ErrTaken as KeepTx.
	Keep(ctx context.Context, r Request, a Answer) error
	// ForgetFlowTx deletes, in tx, the answers that show a flow, which is
	// being deleted with everything personal.
	ForgetFlowTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error
}

// Keys keeps the answers in the table api_idempotency_keys.
type Keys struct {
	pool     *pgxpool.Pool
	sealer   *pii.Sealer
	log      *slog.Logger
	interval time.Duration
}

var _ Store = (*Keys)(nil)

// New returns the answers kept in pool, their bodies sealed with sealer.
// Run purges expired ones every interval (a minute when zero) and logs to log
// what it could not do.
func New(pool *pgxpool.Pool, sealer *pii.Sealer, log *slog.Logger, interval time.Duration) *Keys {
	if interval <= 0 {
		interval = time.Minute
	}
	return &Keys{pool: pool, sealer: sealer, log: log, interval: interval}
}

// hashDomain separates these request hashes from every other keyed hash.
const hashDomain = "api-idempotency"

// fingerprint is what a request's hash covers, each part prefixed with its
// length so that no two requests run together into the same text.
func fingerprint(r Request) string {
	var b strings.Builder
	for _, part := range []string{r.ClientID, r.Method, r.Path, string(r.Body)} {
		b.WriteString(strconv.Itoa(len(part)))
		b.WriteByte(':')
		b.WriteString(part)
	}
	return b.String()
}

// sealContext binds a sealed body to its row.
func sealContext(organizationID, key string) []string {
	return []string{"api-idempotency:", organizationID, ":", key}
}

// Lookup implements Store. A hash made under a previous data key still
// matches while that key is configured.
func (k *Keys) Lookup(ctx context.Context, r Request) (Answer, error) {
	var (
		hash, sealed []byte
		method, path string
		header       []byte
		keyID        string
		a            Answer
		flowID       *string
		carried      *carriedRow
	)
	err := k.pool.QueryRow(ctx, `select request_hash, method, path, status, header, pii_key_id, body_sealed, flow_id::text, carried
		from api_idempotency_keys where organization_id = $1 and key = $2 and expires_at > now()`,
		r.OrganizationID, r.Key).Scan(&hash, &method, &path, &a.Status, &header, &keyID, &sealed, &flowID, &carried)
	if errors.Is(err, pgx.ErrNoRows) {
		return Answer{}, ErrNotFound
	}
	if err != nil {
		return Answer{}, database.Classify(err)
	}
	if err := json.Unmarshal(header, &a.Header); err != nil {
		return Answer{}, fmt.Errorf("idempotency: headers of a kept answer: %w", err)
	}
	if carried != nil {
		return k.carriedAnswer(r, *carried, hash, keyID, sealed, a, &MismatchError{Method: method, Path: path})
	}
	request := fingerprint(r)
	if !hmac.Equal(hash, k.sealer.Hash(hashDomain, request)) && !k.sealer.HashMatches(hashDomain, request, hash) {
		return Answer{}, &MismatchError{Method: method, Path: path}
	}
	body, err := k.sealer.Open(keyID, sealed, sealContext(r.OrganizationID, r.Key)...)
	if err != nil {
		return Answer{}, fmt.Errorf("idempotency: body of a kept answer: %w", err)
	}
	a.Body = []byte(body)
	if flowID != nil {
		a.FlowID = *flowID
	}
	return a, nil
}

// keepSQL inserts an answer, or replaces one whose key expired. The
// conflict's update takes its times from the row it would have inserted: on
// Citus it may not call now() itself.
const keepSQL = `insert into api_idempotency_keys
		(organization_id, key, request_hash, method, path, flow_id, status, header, pii_key_id, body_sealed, created_at, expires_at)
		values ($1, $2, $3, $4, $5, nullif($6, '')::uuid, $7, $8, $9, $10, now(), now() + $11 * interval '1 microsecond')
		on conflict (organization_id, key) do update set request_hash = excluded.request_hash, method = excluded.method,
			path = excluded.path, flow_id = excluded.flow_id, status = excluded.status, header = excluded.header,
			pii_key_id = excluded.pii_key_id, body_sealed = excluded.body_sealed, carried = null,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		where api_idempotency_keys.expires_at <= excluded.created_at`

// KeepTx implements Store. A concurrent request keeping the same key waits
// here until the first transaction ends, and then fails with ErrTaken.
func (k *Keys) KeepTx(ctx context.Context, tx database.Tx, r Request, a Answer) error {
	return k.keep(ctx, tx, r, a)
}

// Keep implements Store.
func (k *Keys) Keep(ctx context.Context, r Request, a Answer) error {
	return database.Classify(k.keep(ctx, k.pool, r, a))
}

func (k *Keys) keep(ctx context.Context, db database.Querier, r Request, a Answer) error {
	header := []byte("{}")
	if a.Header != nil {
		var err error
		if header, err = json.Marshal(a.Header); err != nil {
			return fmt.Errorf("idempotency: headers: %w", err)
		}
	}
	tag, err := db.Exec(ctx, keepSQL, r.OrganizationID, r.Key, k.sealer.Hash(hashDomain, fingerprint(r)),
		r.Method, r.Path, a.FlowID, a.Status, header, k.sealer.KeyID(),
		k.sealer.Seal(string(a.Body), sealContext(r.OrganizationID, r.Key)...), TTL.Microseconds())
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return ErrTaken
	}
	return nil
}

// ForgetFlowTx implements Store.
func (k *Keys) ForgetFlowTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error {
	_, err := tx.Exec(ctx, `delete from api_idempotency_keys where organization_id = $1 and flow_id = $2::uuid`,
		organizationID, flowID)
	return err
}
