package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// FlowSummary is a flow's row as lists read it: the columns a list shows.
// The organization is the query's.
type FlowSummary struct {
	ID               string  `db:"id"`
	Number           int64   `db:"flow_number"`
	ReferenceID      string  `db:"reference_id"`
	ReferenceName    *string `db:"reference_name"`
	ConsentStatus    string  `db:"consent_status"`
	ProcessStatus    string  `db:"process_status"`
	Sandbox          bool    `db:"sandbox"`
	FlowDefinitionID string  `db:"flow_definition_id"`
	PIIKeyID         string  `db:"pii_key_id"`
	NationalIDSealed []byte  `db:"national_id_sealed"`
	SubjectKeyID     *string `db:"subject_key_id"`
	// The subject key, read with the row as Flow reads it.
	SubjectKeySealed []byte    `db:"subject_key_sealed" select:"(select k.key_sealed from subject_keys k where k.organization_id = flows.organization_id and k.id = flows.subject_key_id)"`
	CreatedAt        time.Time `db:"created_at"`
	UpdatedAt        time.Time `db:"updated_at"`
}

var (
	summaryRows    = newTable[FlowSummary]()
	summaryColumns = ofOrganization(summaryRows.columns)
)

// ListQuery selects a page of an organization's flows.
type ListQuery struct {
	OrganizationID string
	Archived       bool
	ConsentStatus  string // "" for any
	Sandbox        *bool
	ReferenceID    string
	// CursorID is the flow the page starts after (Backwards false) or ends
	// before (Backwards true) in newest-first order; "" for the first page.
	CursorID  string
	Backwards bool
	Limit     int
}

// listSQL is the statement of a page of q and its arguments; at is the
// cursor's created_at when q has a cursor.
//
// A page with a cursor walks the page index from the cursor's position, so
// its cost does not grow with its depth, and reads the cursor's own row
// too, first, when it passes the filters: that the row is there says the
// cursor is still a flow of the organization. The position is given, not
// looked up in a subquery: Citus plans a statement with a subquery anew on
// every call, on the coordinator and on the worker.
func listSQL(q ListQuery, at time.Time) (string, []any) {
	args := []any{q.OrganizationID, q.Archived}
	where := []string{"organization_id = $1", "archived = $2"}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.ConsentStatus != "" {
		where = append(where, "consent_status = "+arg(q.ConsentStatus))
	}
	if q.Sandbox != nil {
		where = append(where, "sandbox = "+arg(*q.Sandbox))
	}
	if q.ReferenceID != "" {
		where = append(where, "reference_id = "+arg(q.ReferenceID))
	}
	order, limit := "created_at desc, id desc", q.Limit+1
	if q.CursorID != "" {
		cmp := "<="
		if q.Backwards {
			cmp, order = ">=", "created_at asc, id asc"
		}
		c := arg(q.CursorID)
		where = append(where, "(created_at, id) "+cmp+" ("+arg(at)+", "+c+")")
		limit++
	}
	// The limit is written into the statement, not bound: with "limit $n"
	// PostgreSQL's generic plan guesses a tenth of the table; with the
	// number in the text each page size gets its own generic plan.
	return `select ` + summaryColumns + ` from flows where ` + strings.Join(where, " and ") +
		` order by ` + order + ` limit ` + strconv.Itoa(limit), args
}

// ListFlows returns one page of flows, newest first, and whether more lie
// beyond it in the direction of travel; the page's round trip may be
// shared. A cursor that is not a flow of the organization is database.ErrNotFound.
// q's cursor must be a UUID and its texts valid UTF-8 without NUL.
//
// A page starts from its cursor's position as s remembers it: the ends of
// every page s served, which are the cursors of the pages beside them, and
// every cursor s looked up. A cursor met for the first time is looked up in
// a round trip of its own.
func (s *SharedReads) ListFlows(ctx context.Context, q ListQuery) ([]FlowSummary, bool, error) {
	var at time.Time
	lookedUp := false
	if q.CursorID != "" {
		var known bool
		if at, known = s.positions.Get(flowRef{q.OrganizationID, q.CursorID}); !known {
			var err error
			if at, err = s.position(ctx, q.OrganizationID, q.CursorID); err != nil {
				return nil, false, err
			}
			lookedUp = true
		}
	}
	sql, args := listSQL(q, at)
	var out []FlowSummary
	err := s.Do(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) }, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		out, err = summaryRows.appendAll(make([]FlowSummary, 0, q.Limit+2), rows)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if q.CursorID != "" {
		if len(out) > 0 && out[0].ID == q.CursorID {
			out = out[1:]
		} else if !lookedUp {
			// The cursor's row is missing when the filters leave it out, or
			// when the flow is gone: a remembered position does not say.
			if _, err := s.position(ctx, q.OrganizationID, q.CursorID); err != nil {
				return nil, false, err
			}
		}
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	if q.Backwards {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	if len(out) > 0 {
		s.positions.Put(flowRef{q.OrganizationID, out[0].ID}, out[0].CreatedAt)
		s.positions.Put(flowRef{q.OrganizationID, out[len(out)-1].ID}, out[len(out)-1].CreatedAt)
	}
	return out, more, nil
}

// position looks up a flow's created_at, and remembers it. database.ErrNotFound.
func (s *SharedReads) position(ctx context.Context, organizationID, id string) (time.Time, error) {
	var at time.Time
	err := s.Do(ctx, func(b *pgx.Batch) {
		b.Queue(positionSQL, organizationID, id)
	}, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&at)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return at, database.ErrNotFound
	}
	if err == nil {
		s.positions.Put(flowRef{organizationID, id}, at)
	}
	return at, err
}

const positionSQL = `select created_at from flows where organization_id = $1 and id = $2`

// maxPositions bounds the created_at of flows that ended a page, which a
// client is likely to give as the next page's cursor, and of cursors looked
// up, that a store remembers (positions): a flow's created_at never changes.
const maxPositions = 8192

type flowRef struct{ organizationID, id string }
