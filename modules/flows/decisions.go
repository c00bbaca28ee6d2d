package flows

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// A decision or a withdrawal runs one way through the modules, in the
// consent module's transaction: consent locks the flow (LockTx), decides and
// signs the receipt, and hands both to flows, which records them
// (RecordDecisionTx, RecordWithdrawalTx) and publishes the event through
// webhooks. Flows calls nothing of consent's on the way, so that the lock,
// the reads and the checks happen once, in one place.

// LockTx reads the organization's flow locked for update in tx, with its
// open incidents and the id of its latest receipt, in one round trip, and
// checks cond against its ETag under the lock, so that no other change comes
// between the check and the decision or withdrawal the caller records.
// ErrNotFound, apperr PreconditionFailed.
func (m *Manager) LockTx(ctx context.Context, tx database.Tx, organizationID, flowID string, cond etag.IfMatch) (Locked, error) {
	if !ids.Valid(flowID) || organizationID == "" {
		return Locked{}, ErrNotFound
	}
	row, incidents, lastReceipt, err := store.LockForDecision(ctx, tx, organizationID, flowID, KindConsentReceipt)
	if err != nil {
		return Locked{}, notFound(err)
	}
	if err := cond.Check(Flow{Version: row.Version}.ETag()); err != nil {
		return Locked{}, err
	}
	f, err := m.toFlow(row)
	if err != nil {
		return Locked{}, err
	}
	return Locked{Flow: withIncidents(f, incidents), LastReceiptID: lastReceipt}, nil
}

// RecordDecisionTx records d on its flow, which the caller holds locked
// (LockTx), in tx: the answer and its evidence, the consent task done, the
// receipt kept as the flow's attachment, the expiry of an acceptance with a
// validity scheduled (see RunExpiry), and flow.accepted or flow.rejected
// published. It returns the decided flow, without its incidents and consent
// link. ErrNotActive when the flow can no longer be answered at d.At
// (decided, cancelled, expired or gone).
func (m *Manager) RecordDecisionTx(ctx context.Context, tx database.Tx, d Decision, receipt SignedReceipt) (Flow, error) {
	if err := receipt.check(); err != nil {
		return Flow{}, err
	}
	if !ids.Valid(d.FlowID) || d.OrganizationID == "" {
		return Flow{}, ErrNotActive
	}
	status, event, outcome := Rejected, webhooks.FlowRejected, DecisionRejected
	if d.Accepted {
		status, event, outcome = Accepted, webhooks.FlowAccepted, DecisionAccepted
	}
	row, err := store.RecordDecision(ctx, tx, d.OrganizationID, d.FlowID, store.Decision{
		ConsentStatus: string(status), At: d.At, ConsentTextSHA256: d.Evidence.TextSHA256,
		ConsentLanguage: orNil(d.Evidence.Language), AssuranceLevel: orNil(d.Evidence.AssuranceLevel),
		ACR: orNil(d.Evidence.ACR), ValidUntil: d.Evidence.ValidUntil,
	})
	if errors.Is(err, database.ErrNotFound) {
		return Flow{}, ErrNotActive
	}
	if err != nil {
		return Flow{}, err
	}
	if err := store.SetTasksStatus(ctx, tx, d.OrganizationID, d.FlowID, TaskConsent, TaskPending, TaskCompleted); err != nil {
		return Flow{}, err
	}
	f, err := m.recordTx(ctx, tx, row, receipt)
	if err != nil {
		return Flow{}, err
	}
	if err := m.scheduleExpiryTx(ctx, tx, f); err != nil {
		return Flow{}, err
	}
	if err := m.publishTx(ctx, tx, f, event); err != nil {
		return Flow{}, err
	}
	m.decisions.WithLabelValues(outcome).Inc()
	return f, nil
}

// RecordWithdrawalTx records w on its flow, which the caller holds locked
// (LockTx), in tx: the acceptance withdrawn, the receipt kept as the flow's
// attachment, and flow.withdrawn published. It returns the withdrawn flow,
// without its incidents and consent link. ErrNotAccepted when the flow's
// consent is not accepted (or the flow is gone).
func (m *Manager) RecordWithdrawalTx(ctx context.Context, tx database.Tx, w Withdrawal, receipt SignedReceipt) (Flow, error) {
	if err := receipt.check(); err != nil {
		return Flow{}, err
	}
	if w.By != ByIndividual && w.By != ByOrganization {
		return Flow{}, fmt.Errorf("flows: a withdrawal by %q", w.By)
	}
	if !ids.Valid(w.FlowID) || w.OrganizationID == "" {
		return Flow{}, ErrNotAccepted
	}
	row, err := store.RecordWithdrawal(ctx, tx, w.OrganizationID, w.FlowID, w.At, w.By)
	if errors.Is(err, database.ErrNotFound) {
		return Flow{}, ErrNotAccepted
	}
	if err != nil {
		return Flow{}, err
	}
	f, err := m.recordTx(ctx, tx, row, receipt)
	if err != nil {
		return Flow{}, err
	}
	if err := m.publishTx(ctx, tx, f, webhooks.FlowWithdrawn); err != nil {
		return Flow{}, err
	}
	m.decisions.WithLabelValues(DecisionWithdrawn).Inc()
	return f, nil
}

// recordTx keeps receipt as the attachment of row, just decided or
// withdrawn in tx, and returns the flow it now is.
func (m *Manager) recordTx(ctx context.Context, tx database.Tx, row store.Flow, receipt SignedReceipt) (Flow, error) {
	a := store.Attachment{OrganizationID: row.OrganizationID, ID: receipt.ID, FlowID: row.ID,
		Kind: KindConsentReceipt, ContentType: "application/jwt", Body: receipt.JWS}
	if err := store.InsertAttachment(ctx, tx, &a); err != nil {
		return Flow{}, err
	}
	row.NumAttachments++
	return m.toFlow(row)
}

// check refuses a receipt that cannot be kept: one without its id, which
// names the attachment, or without its JWS.
func (r SignedReceipt) check() error {
	if !ids.Valid(r.ID) || r.JWS == "" {
		return errors.New("flows: a receipt without its id or its JWS")
	}
	return nil
}

// withIncidents adds a flow's open incidents.
func withIncidents(f Flow, incidents []store.Incident) Flow {
	for _, i := range incidents {
		f.Incidents = append(f.Incidents, Incident{ID: i.ID, TaskID: i.TaskID, TaskType: i.TaskType, Message: i.Message, OpenedAt: i.OpenedAt})
	}
	return f
}
