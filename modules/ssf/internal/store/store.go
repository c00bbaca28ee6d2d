// Package store is the ssf module's SQL: streams, removed subjects and the
// SETs the streams hold.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Stream is a row of ssf_streams.
type Stream struct {
	OrganizationID      string    `db:"organization_id"`
	ID                  string    `db:"id"`
	Aud                 []string  `db:"aud"`
	Description         string    `db:"description"`
	DeliveryMethod      string    `db:"delivery_method"`
	EndpointURL         string    `db:"endpoint_url"`
	AuthorizationSealed []byte    `db:"authorization_sealed"`
	AuthorizationKeyID  string    `db:"authorization_key_id"`
	EventsRequested     []string  `db:"events_requested"`
	EventsDelivered     []string  `db:"events_delivered"`
	Status              string    `db:"status"`
	StatusReason        string    `db:"status_reason"`
	Failures            int       `db:"failures"`
	LastError           string    `db:"last_error"`
	CreatedBy           string    `db:"created_by"`
	CreatedAt           time.Time `db:"created_at"`
	UpdatedAt           time.Time `db:"updated_at"`
}

const streamColumns = `organization_id, id::text, aud, description, delivery_method, endpoint_url, authorization_sealed,
	authorization_key_id, events_requested, events_delivered, status, status_reason, failures, last_error, created_by, created_at, updated_at`

// InsertStream stores s.
func InsertStream(ctx context.Context, db database.Querier, s Stream) error {
	_, err := db.Exec(ctx, `insert into ssf_streams (organization_id, id, aud, description, delivery_method, endpoint_url,
		authorization_sealed, authorization_key_id, events_requested, events_delivered, status, status_reason, created_by, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6, $7, $14, $8, $9, $10, $11, $12, $13, $13)`,
		s.OrganizationID, s.ID, s.Aud, s.Description, s.DeliveryMethod, s.EndpointURL, s.AuthorizationSealed,
		s.EventsRequested, s.EventsDelivered, s.Status, s.StatusReason, s.CreatedBy, s.CreatedAt, s.AuthorizationKeyID)
	return err
}

func collectStream(rows pgx.Rows, err error) (Stream, error) {
	if err != nil {
		return Stream{}, err
	}
	s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Stream])
	if errors.Is(err, pgx.ErrNoRows) {
		return Stream{}, database.ErrNotFound
	}
	return s, err
}

// GetStream returns a stream; lock takes its row for the transaction.
// database.ErrNotFound.
func GetStream(ctx context.Context, db database.Querier, organizationID, id string, lock bool) (Stream, error) {
	q := `select ` + streamColumns + ` from ssf_streams where organization_id = $1 and id = $2`
	if lock {
		q += ` for update`
	}
	return collectStream(db.Query(ctx, q, organizationID, id))
}

// ListStreams returns an organization's streams, oldest first.
func ListStreams(ctx context.Context, db database.Querier, organizationID string) ([]Stream, error) {
	rows, err := db.Query(ctx, `select `+streamColumns+` from ssf_streams where organization_id = $1 order by created_at, id`, organizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Stream])
}

// SaveStream writes what a receiver and a status change set of s.
func SaveStream(ctx context.Context, db database.Querier, s Stream) error {
	_, err := db.Exec(ctx, `update ssf_streams set description = $3, delivery_method = $4, endpoint_url = $5,
		authorization_sealed = $6, authorization_key_id = $13, events_requested = $7, events_delivered = $8, status = $9,
		status_reason = $10, failures = $11, last_error = $12, updated_at = now() where organization_id = $1 and id = $2`,
		s.OrganizationID, s.ID, s.Description, s.DeliveryMethod, s.EndpointURL, s.AuthorizationSealed,
		s.EventsRequested, s.EventsDelivered, s.Status, s.StatusReason, s.Failures, s.LastError, s.AuthorizationKeyID)
	return err
}

// DeleteStream deletes a stream and, by cascade, its SETs and subjects.
func DeleteStream(ctx context.Context, db database.Querier, organizationID, id string) (bool, error) {
	tag, err := db.Exec(ctx, `delete from ssf_streams where organization_id = $1 and id = $2`, organizationID, id)
	return err == nil && tag.RowsAffected() == 1, err
}

// StreamsFor returns the streams of organizations, enabled or paused, that
// deliver eventType and have not removed consentID.
func StreamsFor(ctx context.Context, db database.Querier, organizations []string, eventType, consentID string) ([]Stream, error) {
	rows, err := db.Query(ctx, `select `+streamColumns+` from ssf_streams s
		where organization_id = any($1) and status <> 'disabled' and $2 = any(events_delivered)
		and not exists (select from ssf_removed_subjects r
			where r.organization_id = s.organization_id and r.stream_id = s.id and r.consent_id = $3)
		order by organization_id, id`, organizations, eventType, consentID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Stream])
}

// RemoveSubject takes consentID off a stream; AddSubject puts it back.
func RemoveSubject(ctx context.Context, db database.Querier, organizationID, streamID, consentID string) error {
	_, err := db.Exec(ctx, `insert into ssf_removed_subjects (organization_id, stream_id, consent_id) values ($1, $2, $3)
		on conflict do nothing`, organizationID, streamID, consentID)
	return err
}

// AddSubject implements what RemoveSubject says.
func AddSubject(ctx context.Context, db database.Querier, organizationID, streamID, consentID string) error {
	_, err := db.Exec(ctx, `delete from ssf_removed_subjects where organization_id = $1 and stream_id = $2 and consent_id = $3`,
		organizationID, streamID, consentID)
	return err
}

// SET is a row of ssf_sets.
type SET struct {
	OrganizationID       string     `db:"organization_id"`
	StreamID             string     `db:"stream_id"`
	JTI                  string     `db:"jti"`
	EventType            string     `db:"event_type"`
	ConsentID            string     `db:"consent_id"`
	SourceOrganizationID string     `db:"source_organization_id"`
	JWS                  string     `db:"jws"`
	State                string     `db:"state"`
	Attempts             int        `db:"attempts"`
	LastStatus           *int       `db:"last_status"`
	LastError            string     `db:"last_error"`
	Err                  string     `db:"err"`
	ErrDescription       string     `db:"err_description"`
	SettledAt            *time.Time `db:"settled_at"`
	CreatedAt            time.Time  `db:"created_at"`
}

const setColumns = `organization_id, stream_id::text, jti::text, event_type, consent_id, source_organization_id, jws, state,
	attempts, last_status, last_error, err, err_description, settled_at, created_at`

// InsertSETs stores sets in one statement.
func InsertSETs(ctx context.Context, db database.Querier, sets []SET) error {
	if len(sets) == 0 {
		return nil
	}
	n := len(sets)
	org, stream, jti, typ, consent, source, jws := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	at := make([]time.Time, n)
	for i, s := range sets {
		org[i], stream[i], jti[i], typ[i], consent[i], source[i], jws[i], at[i] = s.OrganizationID, s.StreamID, s.JTI, s.EventType,
			s.ConsentID, s.SourceOrganizationID, s.JWS, s.CreatedAt
	}
	_, err := db.Exec(ctx, `insert into ssf_sets (organization_id, stream_id, jti, event_type, consent_id, source_organization_id, jws, created_at)
		select * from unnest($1::text[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[])`,
		org, stream, jti, typ, consent, source, jws, at)
	return err
}

// Pending returns up to limit of a stream's pending SETs, oldest first.
func Pending(ctx context.Context, db database.Querier, organizationID, streamID string, limit int) ([]SET, error) {
	rows, err := db.Query(ctx, `select `+setColumns+` from ssf_sets
		where organization_id = $1 and stream_id = $2 and state = 'pending' order by created_at, jti limit $3`,
		organizationID, streamID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[SET])
}

// Settle marks pending SETs of a stream acknowledged (err empty) or
// rejected with err and its description, and returns how many it marked.
func Settle(ctx context.Context, db database.Querier, organizationID, streamID string, jtis []string, status *int, err, description string) (int64, error) {
	state := "acknowledged"
	if err != "" {
		state = "rejected"
	}
	// A push's outcome is also an attempt; a poll's ack is not. Two
	// statements rather than a CASE: Citus refuses now() inside CASE or
	// COALESCE in an update.
	sql := `update ssf_sets set state = $4, err = $5, err_description = $6, settled_at = now()
		where organization_id = $1 and stream_id = $2 and jti = any($3::uuid[]) and state = 'pending'`
	args := []any{organizationID, streamID, jtis, state, err, description}
	if status != nil {
		sql = `update ssf_sets set state = $4, err = $5, err_description = $6, settled_at = now(),
			last_status = $7, attempts = attempts + 1, last_attempt_at = now()
			where organization_id = $1 and stream_id = $2 and jti = any($3::uuid[]) and state = 'pending'`
		args = append(args, *status)
	}
	tag, e := db.Exec(ctx, sql, args...)
	return tag.RowsAffected(), e
}

// FailAttempt records a failed push of one SET.
func FailAttempt(ctx context.Context, db database.Querier, organizationID, streamID, jti string, status *int, msg string) error {
	_, err := db.Exec(ctx, `update ssf_sets set attempts = attempts + 1, last_attempt_at = now(), last_status = $4, last_error = $5
		where organization_id = $1 and stream_id = $2 and jti = $3`, organizationID, streamID, jti, status, msg)
	return err
}

// DropPending marks a disabled stream's pending SETs rejected.
func DropPending(ctx context.Context, db database.Querier, organizationID, streamID string) error {
	_, err := db.Exec(ctx, `update ssf_sets set state = 'rejected', err = 'stream_disabled', settled_at = now()
		where organization_id = $1 and stream_id = $2 and state = 'pending'`, organizationID, streamID)
	return err
}

// Lease gives job a push stream's delivery until now+d, unless it is held
// (by a job pushing it or waiting out its backoff); it reports false when
// the stream is gone, not an enabled push stream, or held.
func Lease(ctx context.Context, db database.Querier, organizationID, streamID string, job int64, d time.Duration) (Stream, bool, error) {
	s, err := collectStream(db.Query(ctx, `update ssf_streams set lease_until = now() + $3::interval, lease_job = $4, retry_at = null
		where organization_id = $1 and id = $2 and status = 'enabled' and delivery_method = 'urn:ietf:rfc:8935'
		and (lease_until is null or lease_until < now())
		returning `+streamColumns, organizationID, streamID, d, job))
	if errors.Is(err, database.ErrNotFound) {
		return Stream{}, false, nil
	}
	return s, err == nil, err
}

// Renew extends job's lease to now+d; it reports false when job no longer
// holds the stream or the stream is no longer an enabled push stream.
func Renew(ctx context.Context, db database.Querier, organizationID, streamID string, job int64, d time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, `update ssf_streams set lease_until = now() + $4::interval
		where organization_id = $1 and id = $2 and lease_job = $3 and status = 'enabled' and delivery_method = 'urn:ietf:rfc:8935'`,
		organizationID, streamID, job, d)
	return err == nil && tag.RowsAffected() == 1, err
}

// Release gives up job's hold of a stream, if it still has it.
func Release(ctx context.Context, db database.Querier, organizationID, streamID string, job int64) error {
	_, err := db.Exec(ctx, `update ssf_streams set lease_until = null, lease_job = null, retry_at = null
		where organization_id = $1 and id = $2 and lease_job = $3`, organizationID, streamID, job)
	return err
}

// Backoff keeps job's hold of a stream until now+d, the end of the backoff
// after its failures-th failed push in a row; it reports false when job no
// longer holds it, or the stream was enabled again (its count reset) or
// changed meanwhile.
func Backoff(ctx context.Context, db database.Querier, organizationID, streamID string, job int64, failures int, d time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, `update ssf_streams set lease_until = now() + $5::interval, retry_at = now() + $5::interval
		where organization_id = $1 and id = $2 and lease_job = $3 and failures = $4
		and status = 'enabled' and delivery_method = 'urn:ietf:rfc:8935'`, organizationID, streamID, job, failures, d)
	return err == nil && tag.RowsAffected() == 1, err
}

// EndBackoff lets a stream waiting out a backoff be pushed at once; a job
// pushing it keeps its lease.
func EndBackoff(ctx context.Context, db database.Querier, organizationID, streamID string) error {
	_, err := db.Exec(ctx, `update ssf_streams set lease_until = null, lease_job = null, retry_at = null
		where organization_id = $1 and id = $2 and retry_at is not null`, organizationID, streamID)
	return err
}

// Hold is who holds an enabled push stream's delivery, and for how long.
type Hold struct {
	Job     int64         `db:"job"`       // 0 when none
	Left    time.Duration `db:"remaining"` // until the lease ends
	Backoff bool          `db:"backoff"`   // the holder waits out a failed push's backoff
}

// Holding returns a stream's hold; false when the stream is gone or not an
// enabled push stream.
func Holding(ctx context.Context, db database.Querier, organizationID, streamID string) (Hold, bool, error) {
	rows, err := db.Query(ctx, `select coalesce(lease_job, 0) as job,
		case when lease_until > now() then lease_until - now() else interval '0' end as remaining,
		coalesce(retry_at > now(), false) as backoff
		from ssf_streams where organization_id = $1 and id = $2 and status = 'enabled' and delivery_method = 'urn:ietf:rfc:8935'`,
		organizationID, streamID)
	if err != nil {
		return Hold{}, false, err
	}
	h, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Hold])
	if errors.Is(err, pgx.ErrNoRows) {
		return Hold{}, false, nil
	}
	if h.Left <= 0 {
		h.Job = 0
	}
	return h, err == nil, err
}

// RecordOutcome sets a stream's failure count and last error: a success
// clears them; a failure counts one more. It returns the count.
func RecordOutcome(ctx context.Context, db database.Querier, organizationID, streamID string, failed bool, msg string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `update ssf_streams set failures = case when $3 then failures + 1 else 0 end,
		last_error = case when $3 then $4 else last_error end
		where organization_id = $1 and id = $2 returning failures`, organizationID, streamID, failed, msg).Scan(&n)
	return n, err
}

// OfConsent returns the consent-revoked SETs that name consentID of
// sourceOrganizationID, across data holders, oldest first.
func OfConsent(ctx context.Context, db database.Querier, sourceOrganizationID, consentID string) ([]SET, error) {
	rows, err := db.Query(ctx, `select `+setColumns+` from ssf_sets where consent_id = $1 and source_organization_id = $2
		order by created_at, jti`, consentID, sourceOrganizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[SET])
}

// StaleAuthorizations returns up to limit streams whose Authorization header
// another key than current sealed.
func StaleAuthorizations(ctx context.Context, db database.Querier, current string, limit int) ([]Stream, error) {
	rows, err := db.Query(ctx, `select `+streamColumns+` from ssf_streams
		where authorization_key_id <> '' and authorization_key_id <> $1 order by organization_id, id limit $2`, current, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Stream])
}

// Reseal stores a stream's Authorization header sealed again under keyID,
// unless another change sealed it meanwhile.
func Reseal(ctx context.Context, db database.Querier, s Stream, keyID string, sealed []byte) error {
	_, err := db.Exec(ctx, `update ssf_streams set authorization_sealed = $4, authorization_key_id = $5
		where organization_id = $1 and id = $2 and authorization_key_id = $3`, s.OrganizationID, s.ID, s.AuthorizationKeyID, sealed, keyID)
	return err
}

// StreamRef names a stream.
type StreamRef struct {
	OrganizationID string `db:"organization_id"`
	ID             string `db:"id"`
}

// Backlogged returns the enabled push streams that hold pending SETs.
func Backlogged(ctx context.Context, db database.Querier) ([]StreamRef, error) {
	rows, err := db.Query(ctx, `select s.organization_id, s.id::text as id from ssf_streams s
		where s.status = 'enabled' and s.delivery_method = 'urn:ietf:rfc:8935'
		and exists (select 1 from ssf_sets x where x.organization_id = s.organization_id and x.stream_id = s.id and x.state = 'pending')`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[StreamRef])
}

// Backlog is what one stream holds undelivered.
type Backlog struct {
	StreamID string    `db:"stream_id"`
	Pending  int       `db:"pending"`
	Oldest   time.Time `db:"oldest"`
}

// Backlogs returns the backlog of each of an organization's streams that
// holds pending SETs.
func Backlogs(ctx context.Context, db database.Querier, organizationID string) ([]Backlog, error) {
	rows, err := db.Query(ctx, `select stream_id::text as stream_id, count(*)::int as pending, min(created_at) as oldest from ssf_sets
		where organization_id = $1 and state = 'pending' group by stream_id`, organizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Backlog])
}

// Lag is how far behind one stream is.
type Lag struct {
	OrganizationID string  `db:"organization_id"`
	StreamID       string  `db:"stream_id"`
	Pending        int     `db:"pending"`
	Seconds        float64 `db:"seconds"` // the oldest pending SET's age; 0 when none
}

// Lags returns every stream's lag.
func Lags(ctx context.Context, db database.Querier) ([]Lag, error) {
	rows, err := db.Query(ctx, `select s.organization_id, s.id::text as stream_id, count(x.jti)::int as pending,
		coalesce(extract(epoch from now() - min(x.created_at)), 0)::float8 as seconds
		from ssf_streams s left join ssf_sets x on x.organization_id = s.organization_id and x.stream_id = s.id and x.state = 'pending'
		group by s.organization_id, s.id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Lag])
}
