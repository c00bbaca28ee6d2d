package consent

import (
	"context"
	"fmt"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
)

// recorder makes a decision or a withdrawal binding, in the transaction that
// holds its flow locked: it signs the receipt and hands both to flows, which
// records them and publishes the event. The journey and the organization's
// withdrawal share it, so that both take the one path.
type recorder struct {
	flows    Flows
	texts    Texts
	receipts *receipts.Service
}

// textTx reads, in tx, the definition version f pinned: the text the person
// saw, read once per decision or withdrawal.
func (r recorder) textTx(ctx context.Context, tx database.Tx, f flows.Flow) (Version, error) {
	text, err := r.texts.VersionTx(ctx, tx, f.OrganizationID, f.FlowDefinitionID, f.FlowDefinitionVersion)
	if err != nil {
		return Version{}, fmt.Errorf("consent: definition of flow %s: %w", f.ID, err)
	}
	return text, nil
}

// decideTx signs the receipt of d, the decision on f, which tx holds locked,
// and has flows record both. flows.ErrNotActive.
func (r recorder) decideTx(ctx context.Context, tx database.Tx, f flows.Flow, text Version, d flows.Decision) (flows.Flow, error) {
	decision := flows.DecisionRejected
	if d.Accepted {
		decision = flows.DecisionAccepted
	}
	receipt, err := r.receipts.SignTx(ctx, tx, receipts.Facts{Flow: f, Recipient: text.Recipient, Decision: decision, At: d.At, Evidence: d.Evidence})
	if err != nil {
		return flows.Flow{}, fmt.Errorf("consent: receipt of %s: %w", f.ID, err)
	}
	return r.flows.RecordDecisionTx(ctx, tx, d, receipt)
}

// withdrawTx withdraws locked's acceptance for by: it signs the withdrawal's
// receipt, which names the acceptance's, and has flows record both. It
// returns the withdrawn flow and the receipt. flows.ErrNotAccepted.
func (r recorder) withdrawTx(ctx context.Context, tx database.Tx, locked flows.Locked, text Version, by string) (flows.Flow, flows.SignedReceipt, error) {
	f := locked.Flow
	w := flows.Withdrawal{OrganizationID: f.OrganizationID, FlowID: f.ID, By: by, At: time.Now()}
	receipt, err := r.receipts.SignTx(ctx, tx, receipts.Facts{Flow: f, Recipient: text.Recipient, Decision: flows.DecisionWithdrawn, At: w.At,
		Evidence: f.Evidence, Previous: locked.LastReceiptID, WithdrawnBy: by})
	if err != nil {
		return flows.Flow{}, flows.SignedReceipt{}, fmt.Errorf("consent: receipt of %s: %w", f.ID, err)
	}
	withdrawn, err := r.flows.RecordWithdrawalTx(ctx, tx, w, receipt)
	if err != nil {
		return flows.Flow{}, flows.SignedReceipt{}, err
	}
	return withdrawn, receipt, nil
}

// WithdrawalService implements Withdrawals: the organization's withdrawal
// takes the journey's path without the person's proof.
type WithdrawalService struct {
	db    database.Beginner
	links LinkStore
	recorder
}

var _ Withdrawals = (*WithdrawalService)(nil)

// NewWithdrawals returns the organization's withdrawals; receiptService signs the
// withdrawals' receipts, and links gives the consent link a withdrawn flow
// is answered with.
func NewWithdrawals(db database.Beginner, links LinkStore, flowsModule Flows, texts Texts, receiptService *receipts.Service) *WithdrawalService {
	return &WithdrawalService{db: db, links: links, recorder: recorder{flows: flowsModule, texts: texts, receipts: receiptService}}
}

// Withdraw implements Withdrawals.
func (s *WithdrawalService) Withdraw(ctx context.Context, c flows.Caller, flowID string, cond etag.IfMatch,
	before ...database.BeforeCommit[flows.Flow]) (flows.Flow, error) {
	if c.OrganizationID == "" {
		return flows.Flow{}, flows.ErrNotFound
	}
	var out flows.Flow
	err := database.WithTx(ctx, s.db, func(tx database.Tx) error {
		locked, err := s.flows.LockTx(ctx, tx, c.OrganizationID, flowID, cond)
		if err != nil {
			return err
		}
		if locked.Flow.ConsentStatus != flows.Accepted {
			return flows.ErrNotAccepted
		}
		text, err := s.textTx(ctx, tx, locked.Flow)
		if err != nil {
			return err
		}
		f, _, err := s.withdrawTx(ctx, tx, locked, text, flows.ByOrganization)
		if err != nil {
			return err
		}
		// A flow's incidents change only under its lock, which tx holds:
		// those read with the lock are the withdrawn flow's.
		f.Incidents = locked.Flow.Incidents
		if f.ConsentURL, err = s.links.URLTx(ctx, tx, FlowRef{OrganizationID: f.OrganizationID, FlowID: f.ID}); err != nil {
			return fmt.Errorf("consent: link of %s: %w", f.ID, err)
		}
		out = f
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return flows.Flow{}, err
	}
	return out, nil
}
