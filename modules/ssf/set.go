package ssf

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// A SET's claims (RFC 8417 §2.2, SSF 1.0 §4). They carry the consent and
// its organization by id alone: nothing personal.
type setClaims struct {
	Iss    string                    `json:"iss"`
	JTI    string                    `json:"jti"`
	IAT    int64                     `json:"iat"`
	Aud    any                       `json:"aud"`
	Txn    string                    `json:"txn,omitempty"`
	SubID  any                       `json:"sub_id"`
	Events map[string]map[string]any `json:"events"`
}

// opaque is an RFC 9493 opaque subject identifier.
type opaque struct {
	Format string `json:"format"`
	ID     string `json:"id"`
}

// consentSubject is a revocation's complex subject: the consent and the
// organization it was given to.
type consentSubject struct {
	Format       string `json:"format"`
	Consent      opaque `json:"consent"`
	Organization opaque `json:"organization"`
}

// audience is aud as RFC 7519 writes it: one string, or an array of several.
func audience(aud []string) any {
	if len(aud) == 1 {
		return aud[0]
	}
	return aud
}

// newSET signs one SET for stream s and returns its row, not yet stored.
func (m *Module) newSET(ctx context.Context, tx database.Tx, s store.Stream, eventType string, subject any, event map[string]any, txn string) (store.SET, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return store.SET{}, err
	}
	now := m.now().UTC().Truncate(time.Microsecond)
	claims, err := json.Marshal(setClaims{Iss: m.issuer, JTI: id.String(), IAT: now.Unix(), Aud: audience(s.Aud), Txn: txn,
		SubID: subject, Events: map[string]map[string]any{eventType: event}})
	if err != nil {
		return store.SET{}, err
	}
	jws, err := m.signer.SignReceiptTx(ctx, tx, SETType, claims)
	if err != nil {
		return store.SET{}, err
	}
	return store.SET{OrganizationID: s.OrganizationID, StreamID: s.ID, JTI: id.String(), EventType: eventType, JWS: jws,
		State: "pending", CreatedAt: now}, nil
}

// streamSubject names the stream itself, the subject of SSF's own events.
func streamSubject(s store.Stream) any { return opaque{Format: "opaque", ID: s.ID} }

// RevokedTx implements Transmitter.
func (m *Module) RevokedTx(ctx context.Context, tx database.Tx, r Revocation) error {
	holders, err := m.holders.DataHoldersTx(ctx, tx, r.OrganizationID, r.DefinitionID, r.DefinitionVersion)
	if err != nil || len(holders) == 0 {
		return err
	}
	streams, err := store.StreamsFor(ctx, tx, holders, EventConsentRevoked, r.ConsentID)
	if err != nil || len(streams) == 0 {
		return err
	}
	subject := consentSubject{Format: "complex", Consent: opaque{Format: "opaque", ID: r.ConsentID},
		Organization: opaque{Format: "opaque", ID: r.OrganizationID}}
	event := map[string]any{"reason": r.Reason, "initiator": r.Initiator, "event_timestamp": r.At.Unix()}
	sets := make([]store.SET, 0, len(streams))
	for _, s := range streams {
		set, err := m.newSET(ctx, tx, s, EventConsentRevoked, subject, event, r.Txn)
		if err != nil {
			return err
		}
		set.ConsentID, set.SourceOrganizationID = r.ConsentID, r.OrganizationID
		sets = append(sets, set)
	}
	return m.enqueueTx(ctx, tx, streams, sets)
}

// enqueueTx stores sets, one per stream of streams in the same order, and
// starts the push of each enabled push stream, in tx.
func (m *Module) enqueueTx(ctx context.Context, tx database.Tx, streams []store.Stream, sets []store.SET) error {
	if err := store.InsertSETs(ctx, tx, sets); err != nil {
		return err
	}
	var push []store.Stream
	for _, s := range streams {
		if s.DeliveryMethod == DeliveryPush && Status(s.Status) == Enabled {
			push = append(push, s)
		}
	}
	if len(push) == 0 {
		return nil
	}
	return m.startPushTx(ctx, tx, push)
}

// streamEventTx puts one of SSF's own events on stream s.
func (m *Module) streamEventTx(ctx context.Context, tx database.Tx, s store.Stream, eventType string, event map[string]any) error {
	set, err := m.newSET(ctx, tx, s, eventType, streamSubject(s), event, "")
	if err != nil {
		return err
	}
	return m.enqueueTx(ctx, tx, []store.Stream{s}, []store.SET{set})
}
