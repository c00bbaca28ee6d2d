package flows

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// Attachments implements Service.
func (m *Manager) Attachments(ctx context.Context, c Caller, flowID string) ([]Attachment, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return nil, ErrNotFound
	}
	var out []Attachment
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := store.GetFlow(ctx, tx, c.OrganizationID, flowID, false); err != nil {
			return notFound(err)
		}
		rows, err := store.Attachments(ctx, tx, c.OrganizationID, flowID, false)
		out = make([]Attachment, len(rows))
		for i, r := range rows {
			out[i] = toAttachment(r)
		}
		return err
	})
	return out, err
}

// Attachment implements Service.
func (m *Manager) Attachment(ctx context.Context, c Caller, flowID, attachmentID string) (Attachment, error) {
	if !ids.Valid(flowID) || !ids.Valid(attachmentID) || c.OrganizationID == "" {
		return Attachment{}, ErrNotFound
	}
	a, err := store.GetAttachment(ctx, m.pool, c.OrganizationID, flowID, attachmentID)
	if err != nil {
		return Attachment{}, notFound(err)
	}
	return toAttachment(a), nil
}

// AttachmentsTx lists any organization's flow's attachments with their
// bodies, in tx: the consent module shows the person their receipts.
func (m *Manager) AttachmentsTx(ctx context.Context, tx database.Tx, f Flow) ([]Attachment, error) {
	rows, err := store.Attachments(ctx, tx, f.OrganizationID, f.ID, true)
	out := make([]Attachment, len(rows))
	for i, r := range rows {
		out[i] = toAttachment(r)
	}
	return out, err
}

// QueueAttachments adds to b the read of any organization's flow's
// attachments with their bodies, and returns the function that gives them
// once b is sent: the consent module shows the person their receipts.
func (m *Manager) QueueAttachments(b *database.Batch, f Flow) func() ([]Attachment, error) {
	read := store.QueueAttachments(b, f.OrganizationID, f.ID, true)
	return func() ([]Attachment, error) {
		rows, err := read()
		out := make([]Attachment, len(rows))
		for i, r := range rows {
			out[i] = toAttachment(r)
		}
		return out, err
	}
}

// QueueUses adds to b the read of up to limit of any organization's flow's
// uses, latest first, and returns the function that gives them once b is
// sent: the consent module shows the person how their consent was used.
func (m *Manager) QueueUses(b *database.Batch, f Flow, limit int) func() ([]Use, error) {
	read := store.QueueLatestUses(b, f.OrganizationID, f.ID, limit)
	return func() ([]Use, error) {
		rows, err := read()
		if err != nil {
			return nil, err
		}
		out := make([]Use, len(rows))
		for i, r := range rows {
			if out[i], err = m.toUse(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

func toAttachment(a store.Attachment) Attachment {
	return Attachment{ID: a.ID, FlowID: a.FlowID, Kind: a.Kind, ContentType: a.ContentType, Body: a.Body, CreatedAt: a.CreatedAt}
}
