package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// SubjectKey is a row of subject_keys: the data key of one person within
// one organization, sealed under the data key named KeyID. KeySealed is nil
// once the key has been destroyed.
type SubjectKey struct {
	OrganizationID   string     `db:"organization_id"`
	ID               string     `db:"id"`
	Subject          []byte     `db:"subject"`
	KeyID            string     `db:"pii_key_id"`
	KeySealed        []byte     `db:"key_sealed"`
	NationalIDSealed []byte     `db:"national_id_sealed"`
	PersonIndex      []byte     `db:"person_index"`
	PersonIndexKey   *string    `db:"person_index_key"`
	CreatedAt        time.Time  `db:"created_at"`
	DestroyedAt      *time.Time `db:"destroyed_at"`
}

// ErrSubjectKeyMissing means a flow was to be sealed under a subject key
// that is not the person's live key: another was theirs already, or it has
// been destroyed meanwhile.
var ErrSubjectKeyMissing = errors.New("store: the subject key is not the person's live key")

var subjectKeyRows = newTable[SubjectKey]()

// A person is looked up by each of their subjects (their subject under
// each data key configured, the current first) with an equality of its
// own: PostgreSQL, asked for "subject = any(…)" of a table whose statistics
// say it is small, filters the organization's every key instead of
// descending the index, and keeps the plan as the table grows.

// subjectLookups is "(select columns from subject_keys where … subject =
// $first …) union all …" for n subjects: $first, then $rest on.
func subjectLookups(columns string, n, first, rest int) string {
	lookups := make([]string, n)
	for i := range lookups {
		param := first
		if i > 0 {
			param = rest + i - 1
		}
		lookups[i] = `(select ` + columns + ` from subject_keys
			where organization_id = $1 and subject = $` + strconv.Itoa(param) + ` and destroyed_at is null)`
	}
	return strings.Join(lookups, " union all ")
}

// subjectKeySQL holds the statements made for a number of subjects.
var subjectKeySQL sync.Map

func cachedSQL(name string, n int, make func() string) string {
	key := name + ":" + strconv.Itoa(n)
	if q, ok := subjectKeySQL.Load(key); ok {
		return q.(string)
	}
	q := make()
	subjectKeySQL.Store(key, q)
	return q
}

// insertSubjectKeyArgs are the arguments of the statements that insert k:
// k's columns, then the subjects after the first, which is k's.
func insertSubjectKeyArgs(k SubjectKey, subjects [][]byte) []any {
	args := []any{k.OrganizationID, k.ID, k.Subject, k.KeyID, k.KeySealed, k.NationalIDSealed, k.PersonIndex, k.PersonIndexKey}
	for _, s := range subjects[1:] {
		args = append(args, s)
	}
	return args
}

const insertSubjectKeyColumns = `insert into subject_keys (organization_id, id, subject, pii_key_id, key_sealed, national_id_sealed, person_index, person_index_key)`

// insertSubjectKeySQL inserts a key unless the person has a live key under
// one of their n subjects ($3, then $9 on).
func insertSubjectKeySQL(n int) string {
	return cachedSQL("insert", n, func() string {
		q := insertSubjectKeyColumns + ` select $1, $2, $3, $4, $5, $6, $7, $8`
		if n > 1 {
			q += ` where not exists (` + subjectLookups("1", n, 3, 9) + `)`
		}
		return q + ` on conflict (organization_id, subject) where destroyed_at is null do nothing`
	})
}

// FindOrInsertSubjectKey returns the live key of k's organization whose
// subject is one of subjects (a person's subject under each data key
// configured, the current first, which is k's), or else inserts k and
// returns it. A concurrent insert of the same person's key that wins makes
// it return database.ErrNotFound: the caller asks again, and then finds the winner's.
func FindOrInsertSubjectKey(ctx context.Context, db DB, k SubjectKey, subjects [][]byte) (SubjectKey, error) {
	return subjectKeyRows.one(db.Query(ctx, findOrInsertSubjectKeySQL(len(subjects)), insertSubjectKeyArgs(k, subjects)...))
}

// FindOrInsertSubjectKeys is FindOrInsertSubjectKey for many keys in one
// round trip: found[i] is the key of keys[i], or a zero key (ID "") when a
// concurrent insert won, which the caller asks for again.
func FindOrInsertSubjectKeys(ctx context.Context, db DB, keys []SubjectKey, subjects [][][]byte) (found []SubjectKey, err error) {
	var b pgx.Batch
	for i, k := range keys {
		b.Queue(findOrInsertSubjectKeySQL(len(subjects[i])), insertSubjectKeyArgs(k, subjects[i])...)
	}
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	found = make([]SubjectKey, len(keys))
	for i := range keys {
		found[i], err = subjectKeyRows.one(br.Query())
		if err != nil && !errors.Is(err, database.ErrNotFound) {
			return nil, err
		}
	}
	return found, br.Close()
}

// findOrInsertSubjectKeySQL looks the person up by each of their n subjects
// ($3, then $9 on) and inserts the key when none is found.
func findOrInsertSubjectKeySQL(n int) string {
	return cachedSQL("find", n, func() string {
		return `with found as (` + subjectLookups(subjectKeyRows.columns, n, 3, 9) + ` limit 1),
		made as (` + insertSubjectKeyColumns + `
			select $1, $2, $3, $4, $5, $6, $7, $8 where not exists (select 1 from found)
			on conflict (organization_id, subject) where destroyed_at is null do nothing
			returning ` + subjectKeyRows.columns + `)
		select * from found union all select * from made`
	})
}

// LockSubjectKeys returns the ids of the live keys of organizationID whose
// subject is one of subjects, locked for update: a flow sealed under one of
// them that commits later waits for the caller's transaction, and one that
// committed before is seen by the caller's next statement.
func LockSubjectKeys(ctx context.Context, db DB, organizationID string, subjects [][]byte) ([]string, error) {
	var ids []string
	for _, subject := range subjects {
		rows, err := db.Query(ctx, `select id::text from subject_keys
			where organization_id = $1 and subject = $2 and destroyed_at is null for update`, organizationID, subject)
		if err != nil {
			return nil, err
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		ids = append(ids, found...)
	}
	return ids, nil
}

// DestroySubjectKeys destroys the live keys of organizationID whose subject
// is one of subjects: the sealed key and everything of the person go, the
// row stays with the time of its destruction. It returns the keys destroyed.
func DestroySubjectKeys(ctx context.Context, db DB, organizationID string, subjects [][]byte) ([]SubjectKey, error) {
	var destroyed []SubjectKey
	for _, subject := range subjects {
		keys, err := subjectKeyRows.all(db.Query(ctx, `update subject_keys set key_sealed = null, national_id_sealed = null,
				person_index = null, person_index_key = null, destroyed_at = now()
			where organization_id = $1 and subject = $2 and destroyed_at is null
			returning `+subjectKeyRows.columns, organizationID, subject))
		if err != nil {
			return nil, err
		}
		destroyed = append(destroyed, keys...)
	}
	return destroyed, nil
}

// DestroyEmptySubjectKeys destroys, as DestroySubjectKeys does, the live
// keys of organizationID whose subject is one of subjects and under which
// no flow is sealed any more. It returns the keys destroyed.
func DestroyEmptySubjectKeys(ctx context.Context, db DB, organizationID string, subjects [][]byte) ([]SubjectKey, error) {
	return subjectKeyRows.all(db.Query(ctx, `update subject_keys k set key_sealed = null, national_id_sealed = null,
			person_index = null, person_index_key = null, destroyed_at = now()
		where k.organization_id = $1 and k.subject = any($2) and k.destroyed_at is null
			and not exists (select 1 from flows f where f.organization_id = k.organization_id and f.subject_key_id = k.id)
		returning `+subjectKeyRows.columns, organizationID, subjects))
}

// LockSubjectKey returns the live key id of organizationID, locked for
// update. database.ErrNotFound when it is destroyed or gone.
func LockSubjectKey(ctx context.Context, db DB, organizationID, id string) (SubjectKey, error) {
	return subjectKeyRows.one(db.Query(ctx, `select `+subjectKeyRows.columns+` from subject_keys
		where organization_id = $1 and id = $2 and destroyed_at is null for update`, organizationID, id))
}

// DestroySubjectKeyIfEmpty destroys, as DestroySubjectKeys does, the live
// key id of organizationID when no flow is sealed under it any more.
func DestroySubjectKeyIfEmpty(ctx context.Context, db DB, organizationID, id string) error {
	_, err := db.Exec(ctx, `update subject_keys k set key_sealed = null, national_id_sealed = null,
			person_index = null, person_index_key = null, destroyed_at = now()
		where k.organization_id = $1 and k.id = $2 and k.destroyed_at is null
			and not exists (select 1 from flows f where f.organization_id = k.organization_id and f.subject_key_id = k.id)`,
		organizationID, id)
	return err
}

// StaleSubjectKeys returns up to limit live keys sealed under a data key
// other than keyID.
func StaleSubjectKeys(ctx context.Context, db DB, keyID string, limit int) ([]SubjectKey, error) {
	return subjectKeyRows.all(db.Query(ctx, `select `+subjectKeyRows.columns+` from subject_keys
		where pii_key_id <> $1 and destroyed_at is null order by organization_id, id limit $2`, keyID, limit))
}

// ResealSubjectKey stores a key sealed again under keyID, with its subject
// hashed again, unless it is no longer sealed under k.KeyID (or destroyed).
func ResealSubjectKey(ctx context.Context, db DB, k SubjectKey, keyID string, subject, sealed []byte) error {
	_, err := db.Exec(ctx, `update subject_keys set pii_key_id = $4, subject = $5, key_sealed = $6
		where organization_id = $1 and id = $2 and pii_key_id = $3 and destroyed_at is null`,
		k.OrganizationID, k.ID, k.KeyID, keyID, subject, sealed)
	return err
}

// UnindexedSubjectKeys returns up to limit live keys after cursor, in the
// primary key's order, whose blind index is missing or made under a key
// other than version.
func UnindexedSubjectKeys(ctx context.Context, db DB, version string, after IndexCursor, limit int) ([]SubjectKey, error) {
	return afterCursor(ctx, db, subjectKeyRows, "subject_keys", "destroyed_at is null and person_index_key is distinct from $1",
		[]any{version}, after, limit)
}

// CountUnindexedSubjectKeys counts the live keys whose blind index is
// missing or made under a key other than version.
func CountUnindexedSubjectKeys(ctx context.Context, db DB, version string) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `select count(*) from subject_keys
		where destroyed_at is null and person_index_key is distinct from $1`, version).Scan(&n)
	return n, err
}

// SubjectIndexed is a live key's blind index, made from the national id it
// keeps.
type SubjectIndexed struct {
	Key   SubjectKey
	Index []byte
}

// SetSubjectPersonIndexes stores each live key's blind index under version:
// a statement per organization, in one round trip.
func SetSubjectPersonIndexes(ctx context.Context, db DB, indexed []SubjectIndexed, version string) error {
	return sendByOrganization(ctx, db, indexed, func(x SubjectIndexed) string { return x.Key.OrganizationID },
		`update subject_keys k set person_index = v.person_index, person_index_key = $2
			from unnest($3::text[]::uuid[], $4::bytea[]) as v(id, person_index)
			where k.organization_id = $1 and k.id = v.id and k.destroyed_at is null`,
		func(run []SubjectIndexed) []any {
			return []any{version, arrayOf(run, func(x SubjectIndexed) string { return x.Key.ID }),
				arrayOf(run, func(x SubjectIndexed) []byte { return x.Index })}
		})
}

// NewSubjectKey is a key to insert unless its person has a live key under
// one of Subjects (their subject under each data key configured, the
// current first, which is Key's).
type NewSubjectKey struct {
	Key      SubjectKey
	Subjects [][]byte
}

// queueInsertSubjectKeys queues, in b, the insert of each key whose person
// has no live key: a statement per organization. What it inserted, the
// statements after it in the transaction see; a key not inserted is for
// the caller to find (FindOrInsertSubjectKeys).
func queueInsertSubjectKeys(b *pgx.Batch, keys []NewSubjectKey) {
	for _, run := range byOrganization(keys, func(k NewSubjectKey) string { return k.Key.OrganizationID }) {
		args := []any{run[0].Key.OrganizationID,
			arrayOf(run, func(k NewSubjectKey) string { return k.Key.ID }),
			arrayOf(run, func(k NewSubjectKey) []byte { return k.Key.Subject }),
			arrayOf(run, func(k NewSubjectKey) string { return k.Key.KeyID }),
			arrayOf(run, func(k NewSubjectKey) []byte { return k.Key.KeySealed }),
			arrayOf(run, func(k NewSubjectKey) []byte { return k.Key.NationalIDSealed }),
			arrayOf(run, func(k NewSubjectKey) []byte { return k.Key.PersonIndex }),
			arrayOf(run, func(k NewSubjectKey) *string { return k.Key.PersonIndexKey })}
		// The subjects after each key's first (under the data keys before
		// the current one), with the key's place in run.
		var places []int64
		var others [][]byte
		for i, k := range run {
			for _, s := range k.Subjects[1:] {
				places, others = append(places, int64(i+1)), append(others, s)
			}
		}
		if len(others) == 0 {
			b.Queue(insertSubjectKeysSQL+onConflictNothing, args...)
			continue
		}
		b.Queue(insertSubjectKeysSQL+unlessKeyedBefore+onConflictNothing, append(args, places, others)...)
	}
}

const (
	insertSubjectKeysSQL = insertSubjectKeyColumns + `
	select $1, k.id, k.subject, k.pii_key_id, k.key_sealed, k.national_id_sealed, k.person_index, k.person_index_key
	from unnest($2::text[]::uuid[], $3::bytea[], $4::text[], $5::bytea[], $6::bytea[], $7::bytea[], $8::text[])
		with ordinality as k(id, subject, pii_key_id, key_sealed, national_id_sealed, person_index, person_index_key, place)`
	// unlessKeyedBefore looks each of a person's other subjects up by
	// itself ("offset 0" keeps PostgreSQL from joining them to the
	// organization's keys): joined, a plan made while subject_keys was
	// small read every key of the organization in each batch.
	unlessKeyedBefore = `
	where not exists (select 1 from unnest($9::int8[], $10::bytea[]) as o(place, subject) where o.place = k.place
		and exists (select 1 from subject_keys s where s.organization_id = $1 and s.subject = o.subject and s.destroyed_at is null offset 0))`
	onConflictNothing = `
	on conflict (organization_id, subject) where destroyed_at is null do nothing`
)
