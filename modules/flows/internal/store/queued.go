package store

import (
	"errors"

	"github.com/flowd/flowd/internal/database"
)

// This file is reads another module adds to a batch of its own, to read a
// flow's rows in the round trip that reads its own.

// errNotSent is what a queued read answers when its batch did not reach it,
// e.g. because an earlier statement failed.
var errNotSent = errors.New("store: the batch did not reach the statement")

// QueueAttachments adds Attachments' statement to b and returns the
// function that gives its answer once b is sent.
func QueueAttachments(b *database.Batch, organizationID, flowID string, withBody bool) func() ([]Attachment, error) {
	var (
		rows []Attachment
		err  = errNotSent
	)
	b.QueueRows(attachmentsSQL, []any{organizationID, flowID, withBody}, func(r database.Rows) error {
		rows, err = attachmentRows.appendAll(nil, r)
		return err
	})
	return func() ([]Attachment, error) { return rows, err }
}

// QueueLatestUses adds to b the read of up to limit of a flow's latest uses
// (Uses' first page) and returns the function that gives them once b is
// sent.
func QueueLatestUses(b *database.Batch, organizationID, flowID string, limit int) func() ([]Use, error) {
	var (
		rows []Use
		err  = errNotSent
	)
	b.QueueRows(`select `+useRows.columns+` from flow_uses where organization_id = $1 and flow_id = $2
		order by used_at desc, id desc limit $3`, []any{organizationID, flowID, limit}, func(r database.Rows) error {
		rows, err = useRows.appendAll(nil, r)
		return err
	})
	return func() ([]Use, error) { return rows, err }
}
