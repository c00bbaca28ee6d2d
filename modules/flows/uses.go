package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
	"github.com/flowd/flowd/modules/webhooks"
)

// The use ledger: the organization records each use it makes of an
// accepted consent (RecordUse), the flow counts them (NumUses, LastUsedAt),
// and flow.used tells the organization's endpoints. A use after the
// acceptance was withdrawn or expired is refused, and the refusal is the
// caller's to record (RecordUse's refused hook), so that an audit log shows
// the attempt.

// Normalize trims the surrounding white space of in's text.
func (in NewUse) Normalize() NewUse {
	out := NewUse{Action: strings.TrimSpace(in.Action), UsedAt: in.UsedAt, Reference: strings.TrimSpace(in.Reference),
		Resource: strings.TrimSpace(in.Resource), Check: in.Check}
	for _, c := range in.DataCategories {
		out.DataCategories = append(out.DataCategories, strings.TrimSpace(c))
	}
	return out
}

// Validate checks a normalized in at now: the fields that need no flow. It
// returns an apperr Invalid error naming every offending field by its API
// name, or nil.
func (in NewUse) Validate(now time.Time) error {
	var f apperr.Fields
	if in.Action == "" {
		f.Add("action", "is required")
	} else if msg := checkText(in.Action, MaxUseAction); msg != "" {
		f.Add("action", "%s", msg)
	}
	if in.UsedAt != nil && in.UsedAt.After(now.Add(MaxUseClockSkew)) {
		f.Add("usedAt", "must not be in the future")
	}
	if in.Reference != "" {
		if msg := checkText(in.Reference, MaxUseReference); msg != "" {
			f.Add("reference", "%s", msg)
		}
	}
	for i, c := range in.DataCategories {
		if c == "" || checkText(c, MaxUseAction) != "" {
			f.Add(fmt.Sprintf("dataCategories[%d]", i), "must be one of the data categories of the flow's consent definition")
		}
	}
	return f.Err()
}

// RecordUse implements Service. The flow is read without a lock (in a round
// trip concurrent reads share); the use is then counted by a statement that
// holds only while the consent is still in force under the subject key the
// use was sealed with, so that the flow's row is held for the use's last
// round trips alone, and a withdrawal or an erasure that came after the
// read refuses the use. Concurrent uses of an organization are written
// together (useWriter).
func (m *Manager) RecordUse(ctx context.Context, c Caller, flowID string, in NewUse, refused database.BeforeCommit[Flow],
	before ...database.BeforeCommit[Use]) (Use, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return Use{}, ErrNotFound
	}
	now := time.Now()
	in = in.Normalize()
	if err := in.Validate(now); err != nil {
		return Use{}, err
	}
	// A rekey between the read and the count seals the flow under a new
	// key: the use is sealed again under it.
	for range 3 {
		out, err := m.recordUse(ctx, c, flowID, in, now, refused, before)
		if !errors.Is(err, errKeyChanged) {
			return out, err
		}
	}
	return Use{}, fmt.Errorf("flows: flow %s: its subject key kept changing", flowID)
}

// errKeyChanged says a flow's subject key changed between a use's read and
// its count.
var errKeyChanged = errors.New("flows: the flow's subject key changed")

// errNotCounted says a use's flow no longer met the count's condition:
// nothing of the use was written.
var errNotCounted = errors.New("flows: the use was not counted")

// recordUse records in once, from a read of its flow at now.
func (m *Manager) recordUse(ctx context.Context, c Caller, flowID string, in NewUse, now time.Time,
	refused database.BeforeCommit[Flow], before []database.BeforeCommit[Use]) (Use, error) {
	row, err := m.reads.GetFlow(ctx, c.OrganizationID, flowID)
	if err != nil {
		return Use{}, notFound(err)
	}
	f, err := m.toFlow(row)
	if err != nil {
		return Use{}, err
	}
	if in.Check != nil {
		if err := in.Check(f); err != nil {
			return Use{}, err
		}
	}
	if !inForce(f, now) {
		return Use{}, m.refuseUse(ctx, c, flowID, refused)
	}
	if err := m.checkUse(ctx, f, in); err != nil {
		return Use{}, err
	}
	u := store.Use{OrganizationID: c.OrganizationID, ID: ids.New(), FlowID: flowID,
		DataCategories: in.DataCategories, UsedAt: now, RecordedBy: c.ClientID, Resource: orNil(in.Resource)}
	if u.DataCategories == nil {
		u.DataCategories = []string{}
	}
	if in.UsedAt != nil {
		u.UsedAt = *in.UsedAt
	}
	if err := m.sealUseText(row, &u, in.Action, in.Reference); err != nil {
		return Use{}, err
	}
	p := &pendingUse{count: store.UseCount{Use: &u, Now: now, KeyID: row.SubjectKeyID}, flow: f, before: before,
		out: Use{ID: u.ID, FlowID: u.FlowID, Action: in.Action, DataCategories: u.DataCategories, Reference: in.Reference,
			UsedAt: u.UsedAt, RecordedBy: u.RecordedBy, Resource: in.Resource}}
	if err := m.uses.write(ctx, p); !errors.Is(err, errNotCounted) {
		if err != nil {
			return Use{}, err
		}
		return p.out, nil
	}
	// The flow changed after the read: gone, no longer in force, or under
	// another subject key.
	again, err := store.GetFlow(ctx, m.pool, c.OrganizationID, flowID, false)
	if err != nil {
		return Use{}, notFound(err)
	}
	if f, err = m.toFlow(again); err != nil {
		return Use{}, err
	}
	if !inForce(f, time.Now()) {
		return Use{}, m.refuseUse(ctx, c, flowID, refused)
	}
	return Use{}, errKeyChanged
}

// refuseUse records, through refused, a use refused because the flow's
// consent is not in force, under the flow's lock, and returns
// ErrConsentNotInForce. A consent that is in force again (it cannot be)
// would still refuse: the caller asked at a time it was not.
func (m *Manager) refuseUse(ctx context.Context, c Caller, flowID string, refused database.BeforeCommit[Flow]) error {
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		row, err := lockedFlow(ctx, tx, c.OrganizationID, flowID)
		if err != nil {
			return err
		}
		f, err := m.toFlow(row)
		if err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, f, []database.BeforeCommit[Flow]{refused})
	})
	if err != nil {
		return err
	}
	return ErrConsentNotInForce
}

// inForce reports whether f's consent may be used at now: accepted, and
// inside its validity.
func inForce(f Flow, now time.Time) bool {
	return f.ConsentStatus == Accepted && (f.Evidence.ValidUntil == nil || now.Before(*f.Evidence.ValidUntil))
}

// checkUse checks in against its flow f: a use is not before the consent
// was given, and names only data categories of the flow's definition
// version (by either language's name).
func (m *Manager) checkUse(ctx context.Context, f Flow, in NewUse) error {
	var problems apperr.Fields
	if in.UsedAt != nil && f.DecidedAt != nil && in.UsedAt.Before(*f.DecidedAt) {
		problems.Add("usedAt", "must not be before the consent was given")
	}
	if len(in.DataCategories) > 0 {
		categories, err := m.defs.DataCategories(ctx, f.OrganizationID, f.FlowDefinitionID, f.FlowDefinitionVersion)
		if err != nil {
			return err
		}
		for i, c := range in.DataCategories {
			if !slices.ContainsFunc(categories, func(names []string) bool { return slices.Contains(names, c) }) {
				problems.Add(fmt.Sprintf("dataCategories[%d]", i), "must be one of the data categories of the flow's consent definition")
			}
		}
	}
	return problems.Err()
}

// publishUseTx publishes flow.used for p's use, numbered in the flow's
// sequence by the count. It goes to the organization's endpoints that take
// it, never to the flow's own webhookUrl, so it has no delivery task.
func (m *Manager) publishUseTx(ctx context.Context, tx pgx.Tx, p *pendingUse) error {
	ev := eventOf(p.flow, webhooks.FlowUsed, "")
	ev.Sequence, ev.URL = p.count.EventSequence, ""
	u := p.out
	ev.Use = &webhooks.Use{ID: u.ID, DataCategories: u.DataCategories, UsedAt: u.UsedAt, Resource: u.Resource}
	return m.events.PublishTx(ctx, tx, ev)
}

// sealUseText puts the free text of u, a use of the flow of row, into u:
// sealed under the flow's subject key, so that destroying the key (an
// erasure) shreds it wherever it was copied, backups included; as written
// for a flow not yet under one ("flowd flows rekey" seals it then).
func (m *Manager) sealUseText(row store.Flow, u *store.Use, action, reference string) error {
	if row.SubjectKeyID == nil {
		u.Action, u.Reference = &action, orNil(reference)
		return nil
	}
	key, err := subjectkey.Sealing(m.sealer, row.OrganizationID, *row.SubjectKeyID, row.SubjectKeySealed)
	if err != nil {
		return fmt.Errorf("flows: flow %s: %w", row.ID, err)
	}
	u.ActionSealed, u.ReferenceSealed = key.SealUse(u.ID, action, reference)
	return nil
}

// toUse opens u's free text, sealed under its flow's subject key or kept
// as written.
func (m *Manager) toUse(u store.Use) (Use, error) {
	out := Use{ID: u.ID, FlowID: u.FlowID, DataCategories: u.DataCategories, UsedAt: u.UsedAt, RecordedAt: u.RecordedAt,
		RecordedBy: u.RecordedBy, Resource: deref(u.Resource)}
	if u.ActionSealed == nil {
		out.Action, out.Reference = deref(u.Action), deref(u.Reference)
		return out, nil
	}
	if u.SubjectKeyID == nil {
		return Use{}, fmt.Errorf("flows: use %s is sealed, its flow under no subject key", u.ID)
	}
	open, err := m.rowOpener(u.OrganizationID, store.SubjectSealed, u.SubjectKeyID, u.SubjectKeySealed)
	if err != nil {
		return Use{}, fmt.Errorf("flows: use %s: %w", u.ID, err)
	}
	if out.Action, err = open(u.ActionSealed, store.UseContext(u.ID, "action")...); err != nil {
		return Use{}, fmt.Errorf("flows: use %s: action: %w", u.ID, err)
	}
	if u.ReferenceSealed != nil {
		if out.Reference, err = open(u.ReferenceSealed, store.UseContext(u.ID, "reference")...); err != nil {
			return Use{}, fmt.Errorf("flows: use %s: reference: %w", u.ID, err)
		}
	}
	return out, nil
}

// Check validates p and fills in its default limit; errors name the query
// parameters of the API.
func (p *UseParams) Check() error {
	var f apperr.Fields
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	} else if p.Limit < 1 || p.Limit > MaxLimit {
		f.Add("limit", "must be from 1 to %d", MaxLimit)
	}
	if p.StartingAfter != "" && p.EndingBefore != "" {
		f.Add("ending_before", "cannot be combined with starting_after")
	}
	if p.StartingAfter != "" && !ids.Valid(p.StartingAfter) {
		f.Add("starting_after", "must be a use id")
	}
	if p.EndingBefore != "" && !ids.Valid(p.EndingBefore) {
		f.Add("ending_before", "must be a use id")
	}
	return f.Err()
}

// Uses implements Service.
func (m *Manager) Uses(ctx context.Context, c Caller, flowID string, p UseParams) (UsePage, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return UsePage{}, ErrNotFound
	}
	if err := p.Check(); err != nil {
		return UsePage{}, err
	}
	q := store.UseQuery{OrganizationID: c.OrganizationID, FlowID: flowID, Limit: p.Limit}
	cursorParam := "starting_after"
	switch {
	case p.StartingAfter != "":
		q.CursorID = p.StartingAfter
	case p.EndingBefore != "":
		q.CursorID, q.Backwards, cursorParam = p.EndingBefore, true, "ending_before"
	}
	var page UsePage
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := store.GetFlow(ctx, tx, c.OrganizationID, flowID, false); err != nil {
			return notFound(err)
		}
		rows, more, err := store.Uses(ctx, tx, q)
		if errors.Is(err, database.ErrNotFound) {
			return apperr.InvalidFields([]apperr.FieldError{{Field: cursorParam, Message: "is not a use of this flow"}})
		}
		if err != nil {
			return err
		}
		page = UsePage{HasMore: more, Uses: make([]Use, len(rows))}
		for i, r := range rows {
			if page.Uses[i], err = m.toUse(r); err != nil {
				return err
			}
		}
		return nil
	})
	return page, err
}

// NotifyExpiringAcceptances publishes flow.expiring for up to limit
// acceptances whose validity ends within the notice and returns how many it
// notified. Each goes out once: store.ClaimExpiringNotice's conditional
// update claims it in the transaction that publishes it, however many
// instances meet on one flow. With no notice configured it does nothing.
func (m *Manager) NotifyExpiringAcceptances(ctx context.Context, limit int) (int, error) {
	notice := m.cfg.ExpiringNotice
	if notice <= 0 {
		return 0, nil
	}
	due, err := store.DueForExpiringNotice(ctx, m.pool, notice, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	n := 0
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		for _, d := range due {
			row, err := store.ClaimExpiringNotice(ctx, tx, d.OrganizationID, d.ID, notice)
			if errors.Is(err, database.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			f, err := m.toFlow(row)
			if err != nil {
				return err
			}
			// The claim leaves updated_at, the time an event names, as it was:
			// the notice happened when it was claimed.
			f.UpdatedAt = *f.ExpiringNotifiedAt
			if err := m.publishTx(ctx, tx, f, webhooks.FlowExpiring); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
