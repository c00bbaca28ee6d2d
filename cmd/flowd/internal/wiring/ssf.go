package wiring

import (
	"context"
	"strconv"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/modules/webhooks"
)

// flowEvents is what flows publishes its events through: the webhooks
// module, and the Shared Signals transmitter for the events that end an
// accepted consent, in the same transaction.
type flowEvents struct {
	*webhooks.Module
	ssf ssf.Transmitter
}

var _ flows.Events = flowEvents{}

// PublishTx implements flows.Events.
func (e flowEvents) PublishTx(ctx context.Context, tx database.Tx, ev webhooks.Event) error {
	if err := e.Module.PublishTx(ctx, tx, ev); err != nil {
		return err
	}
	r, ok := revocationOf(ev)
	if !ok {
		return nil
	}
	return e.ssf.RevokedTx(ctx, tx, r)
}

// revocationOf says whether ev ends a consent that held, and how: a
// withdrawal, an expiry, the cancellation of an accepted flow, or the
// deletion of one (an erasure deletes each of the person's flows).
func revocationOf(ev webhooks.Event) (ssf.Revocation, bool) {
	r := ssf.Revocation{OrganizationID: ev.OrganizationID, ConsentID: ev.FlowID, DefinitionID: ev.FlowDefinitionID,
		DefinitionVersion: ev.FlowDefinitionVersion, At: ev.OccurredAt, Txn: ev.FlowID + "." + strconv.Itoa(ev.Sequence)}
	accepted := ev.Status == string(flows.Accepted)
	switch {
	case ev.Type == webhooks.FlowWithdrawn:
		r.Reason, r.Initiator = ssf.ReasonWithdrawn, ssf.InitiatorOrganization
		if ev.WithdrawnBy == flows.ByIndividual {
			r.Initiator = ssf.InitiatorIndividual
		}
	case ev.Type == webhooks.FlowExpired:
		r.Reason, r.Initiator = ssf.ReasonExpired, ssf.InitiatorSystem
	case ev.Type == webhooks.FlowCancelled && accepted:
		r.Reason, r.Initiator = ssf.ReasonCancelled, ssf.InitiatorOrganization
	case ev.Type == webhooks.FlowDeleted && accepted:
		r.Reason, r.Initiator = ssf.ReasonErased, ssf.InitiatorOrganization
	default:
		return ssf.Revocation{}, false
	}
	return r, true
}

// NamedNotices are the Shared Signals notices of a consent with each data
// holder's name, which the ssf module does not know: the proof /my and the
// console show.
type NamedNotices struct {
	Notices ssf.Notices
	Names   interface {
		OrganizationName(ctx context.Context, organizationID string) (string, error)
	}
}

var _ ssf.Notices = NamedNotices{}

// NoticesOf implements ssf.Notices.
func (n NamedNotices) NoticesOf(ctx context.Context, organizationID, consentID string) ([]ssf.Notice, error) {
	out, err := n.Notices.NoticesOf(ctx, organizationID, consentID)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for i := range out {
		id := out[i].DataHolderID
		if _, ok := names[id]; !ok {
			if names[id], err = n.Names.OrganizationName(ctx, id); err != nil {
				names[id] = id // a data holder since removed: its id is all there is
			}
		}
		out[i].DataHolderName = names[id]
	}
	return out, nil
}
