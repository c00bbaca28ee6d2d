package flows

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// Check validates p and fills in its default limit; errors name the query
// parameters of the API.
func (p *ListParams) Check() error {
	var f apperr.Fields
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	} else if p.Limit < 1 || p.Limit > MaxLimit {
		f.Add("limit", "must be from 1 to %d", MaxLimit)
	}
	switch p.Status {
	case "", Unopened, Opened, Accepted, Rejected, Withdrawn, Expired:
	default:
		f.Add("status", "must be one of Unopened, Opened, Accepted, Rejected, Withdrawn, Expired")
	}
	if p.StartingAfter != "" && p.EndingBefore != "" {
		f.Add("ending_before", "cannot be combined with starting_after")
	}
	if p.StartingAfter != "" && !ids.Valid(p.StartingAfter) {
		f.Add("starting_after", "must be a flow id")
	}
	if p.EndingBefore != "" && !ids.Valid(p.EndingBefore) {
		f.Add("ending_before", "must be a flow id")
	}
	// PostgreSQL refuses text with NUL or invalid UTF-8; refused here, such
	// a search never reaches a round trip other reads share.
	if len(p.ReferenceID) > 100 || !utf8.ValidString(p.ReferenceID) || strings.ContainsRune(p.ReferenceID, 0) {
		f.Add("referenceId", "must be text of at most 100 characters")
	}
	return f.Err()
}

// List implements Service.
func (m *Manager) List(ctx context.Context, c Caller, p ListParams) (Page, error) {
	if err := p.Check(); err != nil {
		return Page{}, err
	}
	q := store.ListQuery{OrganizationID: c.OrganizationID, Archived: p.Archived, ConsentStatus: string(p.Status),
		Sandbox: p.Sandbox, ReferenceID: p.ReferenceID, Limit: p.Limit}
	cursorParam := "starting_after"
	switch {
	case p.StartingAfter != "":
		q.CursorID = p.StartingAfter
	case p.EndingBefore != "":
		q.CursorID, q.Backwards, cursorParam = p.EndingBefore, true, "ending_before"
	}
	rows, more, err := m.reads.ListFlows(ctx, q)
	if errors.Is(err, database.ErrNotFound) {
		return Page{}, apperr.InvalidFields([]apperr.FieldError{{Field: cursorParam, Message: "is not a flow of this organization"}})
	}
	if err != nil {
		return Page{}, err
	}
	page := Page{HasMore: more, Flows: make([]FlowSummary, 0, len(rows))}
	for _, r := range rows {
		f, err := m.toSummary(r, c.OrganizationID)
		if errors.Is(err, errSubjectKeyDestroyed) {
			continue // its person was erased; the erasure deletes the row
		}
		if err != nil {
			return Page{}, err
		}
		page.Flows = append(page.Flows, f)
	}
	if p.WithIncidents && len(page.Flows) > 0 {
		ids := make([]string, len(page.Flows))
		at := make(map[string]int, len(page.Flows))
		for i, f := range page.Flows {
			ids[i], at[f.ID] = f.ID, i
		}
		incidents, err := store.OpenIncidents(ctx, m.pool, c.OrganizationID, ids)
		if err != nil {
			return Page{}, err
		}
		for _, inc := range incidents {
			f := &page.Flows[at[inc.FlowID]]
			f.Incidents = append(f.Incidents, Incident{ID: inc.ID, TaskID: inc.TaskID, TaskType: inc.TaskType, Message: inc.Message, OpenedAt: inc.OpenedAt})
		}
	}
	return page, nil
}
