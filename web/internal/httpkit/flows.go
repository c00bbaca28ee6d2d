package httpkit

import (
	"context"
	"strings"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/modules/flows"
)

// MaxWithdrawReason keeps a withdrawal's reason within what the audit log
// takes.
const MaxWithdrawReason = 400

// WithdrawReason trims a withdrawal's reason and reports whether it is one:
// 1 to MaxWithdrawReason characters without control or formatting
// characters.
func WithdrawReason(raw string) (string, bool) {
	reason := strings.TrimSpace(raw)
	return reason, reason != "" && fieldcheck.Text(reason, MaxWithdrawReason) == ""
}

// ForgetAnswers returns the hook that deletes, in a flow's deletion, the
// answers kept for Idempotency-Keys that show the flow: it takes everything
// personal with it.
func ForgetAnswers(answers idempotency.Store, organizationID string) database.BeforeCommit[flows.Deletion] {
	return func(ctx context.Context, tx database.Tx, d flows.Deletion) error {
		return answers.ForgetFlowTx(ctx, tx, organizationID, d.FlowID)
	}
}
