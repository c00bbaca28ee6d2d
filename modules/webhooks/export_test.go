package webhooks

import "context"

// RecoverBatch runs one batch of a recovery as its job does, so that a test
// can stop a recovery between batches, as a crash would.
func (m *Module) RecoverBatch(ctx context.Context, organizationID, id string) (more bool, err error) {
	return m.recoverer.RunBatch(ctx, organizationID, id)
}
