package consent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/internal/resources"
	"github.com/flowd/flowd/modules/flows"
)

// The person's own page ("My consents"): every consent request addressed to
// the person signed in, in every organization on this flowd. It is the only
// place that joins organizations, and only for the person themself; each
// view and each withdrawal from it is in the audit log of every
// organization concerned.

// ErrNotYours means a flow the person's own page was asked about is not
// addressed to the person signed in (or does not exist): the page shows
// nothing of it.
var ErrNotYours = errors.New("no such consent of the person signed in")

// PersonPage is the person's own page.
type PersonPage interface {
	// Mine returns every consent request addressed to the person p proves,
	// newest first; one whose definition requires a higher assurance level
	// than p reached is Hidden. It records the view in the audit log of
	// each organization concerned. also, when not nil, adds another
	// module's statements to the round trip that reads what the page shows;
	// they have run when Mine returns without error. ErrNotProven.
	Mine(ctx context.Context, p Proof, also func(*database.Batch)) ([]MyConsent, error)
	// WithdrawMine withdraws the person's accepted consent of flow flowID
	// as the consent link's withdrawal does (a receipt, flow.withdrawn, the
	// same proof and assurance level), and records it in the organization's
	// audit log. ErrNotProven, ErrNotYours, *AssuranceError, *ClosedError.
	WithdrawMine(ctx context.Context, p Proof, flowID string) (IssuedReceipt, error)
	// MyReferenceAt returns the reference of one of the person's requests
	// in organizationID that p's sign-in may see, for the person to name
	// themself to that organization. It records nothing. ErrNotProven,
	// ErrNotYours.
	MyReferenceAt(ctx context.Context, p Proof, organizationID string) (string, error)
}

// MyConsent is one consent request as the person's own page lists it.
type MyConsent struct {
	// Request is the request in the definition version the flow pinned:
	// what the person saw or will see. Of a Hidden one only FlowID,
	// OrganizationID and Text.AssuranceLevel are set.
	Request
	// Hidden is set when the sign-in did not reach the level the consent
	// requires: the page lists it without its details.
	Hidden bool
	// ConsentURL is the link of a request still open, for the person to
	// answer it.
	ConsentURL string
	Receipts   []IssuedReceipt
	// History is what happened to the request, oldest first.
	History []Happening
	// LastUsedAt is when the organization last recorded a use of the
	// consent; nil until uses are recorded.
	LastUsedAt *time.Time
	// Expiring is set once the organization was warned that the accepted
	// consent runs out soon.
	Expiring bool
}

// historyUses is how many of a consent's latest uses its history shows.
const historyUses = 50

// Happenings of a consent request's history.
const (
	HappenedAsked     = "asked"
	HappenedOpened    = "opened"
	HappenedAccepted  = "accepted"
	HappenedRejected  = "rejected"
	HappenedWithdrawn = "withdrawn"
	HappenedExpired   = "expired"
	// HappenedUsed is a use the organization recorded of the consent, and
	// HappenedExpiring the warning that it runs out soon (flow.expiring).
	HappenedUsed     = "used"
	HappenedExpiring = "expiring"
)

// Happening is one step of a request's history.
type Happening struct {
	Kind string
	At   time.Time
	// By says who withdrew: flows.ByIndividual or flows.ByOrganization.
	By string
	// Action is what the organization said it did, of a HappenedUsed.
	Action string
	// Resource is the data holder's resource a consent token was given
	// for, of a HappenedUsed that is one; ResourceName its registered name,
	// empty when it has none.
	Resource, ResourceName string
}

// PersonPageRecorder keeps the trail of the person's own page in the audit
// log of each organization it showed or changed a consent of, naming the
// flows by reference, never the person.
type PersonPageRecorder interface {
	// RecordPersonPageTx records in tx that the person's own page did
	// action ("person_page.viewed", "person_page.withdrawal") on the
	// organization's flows named by referenceIDs.
	RecordPersonPageTx(ctx context.Context, tx database.Tx, organizationID, action string, referenceIDs []string) error
	// QueuePersonPage adds to b what records that the person's own page
	// did action on the flows of each record, in the audit log of the
	// record's organization; a record the same as one recorded within the
	// last within (zero: none) is not recorded again.
	QueuePersonPage(b *database.Batch, action string, records []PersonPageRecord, within time.Duration) error
}

// ViewWindow is how long a view of the person's own page stands for the
// views after it: within it, a view by the same sign-in that shows an
// organization the same flows is not recorded again in its audit log (a
// reload is no new view), while one that shows other flows, or comes from
// another sign-in, is. An hour is the longest a consent session lives by
// default (FLOWD_CONSENT_SESSION_MAX), so a reload is coalesced for the
// whole session.
const ViewWindow = time.Hour

// Actions the person's own page records.
const (
	ActionPersonPageViewed     = "person_page.viewed"
	ActionPersonPageWithdrawal = "person_page.withdrawal"
)

// Mine implements PersonPage. Once the person's flows are found, what the
// page shows of them and the audit entries of the view share one round
// trip, whose statements commit together; the texts the flows pinned are
// read only when not kept yet.
func (s *JourneyService) Mine(ctx context.Context, p Proof, also func(*database.Batch)) ([]MyConsent, error) {
	if p.NationalID == "" {
		return nil, ErrNotProven
	}
	fs, err := s.flows.FlowsOfPerson(ctx, p.NationalID)
	if err != nil {
		return nil, err
	}
	var (
		b       database.Batch
		out     = make([]MyConsent, len(fs))
		reads   = make([]func() error, 0, len(fs))
		records []PersonPageRecord
		shown   = map[string]int{} // organization: its index in records
		now     = time.Now()
	)
	for i, f := range fs {
		text, err := s.texts.Version(ctx, f.OrganizationID, f.FlowDefinitionID, f.FlowDefinitionVersion)
		if err != nil {
			return nil, fmt.Errorf("consent: definition of flow %s: %w", f.ID, err)
		}
		j, ok := shown[f.OrganizationID]
		if !ok {
			j, shown[f.OrganizationID] = len(records), len(records)
			records = append(records, PersonPageRecord{OrganizationID: f.OrganizationID, Session: p.Session})
		}
		records[j].ReferenceIDs = append(records[j].ReferenceIDs, f.ReferenceID)
		if _, err := s.assurance(text.AssuranceLevel, p.ACR); err != nil {
			out[i] = MyConsent{Hidden: true, Request: Request{FlowID: f.ID, OrganizationID: f.OrganizationID,
				Text: Version{AssuranceLevel: text.AssuranceLevel}}}
			continue
		}
		out[i] = s.mine(f, text, now)
		reads = append(reads, s.queueMine(&b, &out[i], f))
	}
	if err := s.audit.QueuePersonPage(&b, ActionPersonPageViewed, records, ViewWindow); err != nil {
		return nil, err
	}
	if also != nil {
		also(&b)
	}
	if err := b.Send(ctx, s.db); err != nil {
		return nil, err
	}
	for _, read := range reads {
		if err := read(); err != nil {
			return nil, err
		}
	}
	if err := s.nameResources(ctx, out); err != nil {
		return nil, err
	}
	names := map[string]string{}
	for i := range out {
		if out[i].Hidden {
			continue
		}
		for j, r := range out[i].Receipts {
			v, err := s.receipts.Verify(ctx, r.JWS)
			if err != nil {
				return nil, fmt.Errorf("consent: a receipt of flow %s: %w", out[i].FlowID, err)
			}
			out[i].Receipts[j].Verified = v
		}
		org := out[i].OrganizationID
		if _, ok := names[org]; !ok {
			if names[org], err = s.orgs.OrganizationName(ctx, org); err != nil {
				return nil, fmt.Errorf("consent: the organization of flow %s: %w", out[i].FlowID, err)
			}
		}
		out[i].OrganizationName = names[org]
	}
	return out, nil
}

// PersonPageRecord names the flows of one organization that the person's
// own page showed or changed, by their references, and the sign-in it did
// it in.
type PersonPageRecord struct {
	OrganizationID string
	ReferenceIDs   []string
	// Session names the sign-in (Proof.Session); empty when unknown.
	Session string
}

// mine is the request of f, pinned to text, with what f itself says of its
// history.
func (s *JourneyService) mine(f flows.Flow, text Version, now time.Time) MyConsent {
	m := MyConsent{Request: s.request(f, text), History: history(f), LastUsedAt: f.LastUsedAt, Expiring: f.Expiring()}
	m.Closure = closure(f, now)
	return m
}

// queueMine adds to b the reads of what m, the request of f, shows besides:
// its uses, its link while open and its receipts. The function it returns
// fills them in once b is sent.
func (s *JourneyService) queueMine(b *database.Batch, m *MyConsent, f flows.Flow) func() error {
	var (
		uses        func() ([]flows.Use, error)
		url         func() (string, error)
		attachments func() ([]flows.Attachment, error)
	)
	if f.NumUses > 0 {
		uses = s.flows.QueueUses(b, f, historyUses)
	}
	if m.Closure == Open {
		url = s.links.QueueURL(b, f.OrganizationID, f.ID)
	}
	if f.NumAttachments > 0 {
		attachments = s.flows.QueueAttachments(b, f)
	}
	return func() (err error) {
		if uses != nil {
			us, err := uses()
			if err != nil {
				return err
			}
			for _, u := range us {
				m.History = append(m.History, Happening{Kind: HappenedUsed, At: u.UsedAt, Action: u.Action, Resource: u.Resource})
			}
			sortHistory(m.History)
		}
		if url != nil {
			if m.ConsentURL, err = url(); err != nil {
				return err
			}
		}
		if attachments == nil {
			return nil
		}
		as, err := attachments()
		for _, a := range as {
			if a.Kind != flows.KindConsentReceipt {
				continue
			}
			// Checked by Mine once the round trip is done: the check may
			// load the receipt keys through a connection of its own.
			m.Receipts = append(m.Receipts, IssuedReceipt{JWS: a.Body})
		}
		return err
	}
}

// history is what happened to f itself, oldest first; queueMine adds the uses
// the organization recorded.
func history(f flows.Flow) []Happening {
	h := []Happening{{Kind: HappenedAsked, At: f.CreatedAt}}
	if f.OpenedAt != nil {
		h = append(h, Happening{Kind: HappenedOpened, At: *f.OpenedAt})
	}
	if f.DecidedAt != nil {
		kind := HappenedRejected
		if f.ConsentStatus == flows.Accepted || f.ConsentStatus == flows.Withdrawn || f.ConsentStatus == flows.Expired {
			kind = HappenedAccepted
		}
		h = append(h, Happening{Kind: kind, At: *f.DecidedAt})
	}
	if f.WithdrawnAt != nil {
		h = append(h, Happening{Kind: HappenedWithdrawn, At: *f.WithdrawnAt, By: f.WithdrawnBy})
	}
	if f.ExpiringNotifiedAt != nil {
		h = append(h, Happening{Kind: HappenedExpiring, At: *f.ExpiringNotifiedAt})
	}
	if f.ExpiredAt != nil {
		h = append(h, Happening{Kind: HappenedExpired, At: *f.ExpiredAt})
	}
	sortHistory(h)
	return h
}

// sortHistory puts h in time order, keeping the order of steps at one
// instant.
func sortHistory(h []Happening) {
	slices.SortStableFunc(h, func(a, b Happening) int { return a.At.Compare(b.At) })
}

// WithdrawMine implements PersonPage. The flow is found among the person's
// own, so a flow id of someone else's is ErrNotYours whatever it names.
func (s *JourneyService) WithdrawMine(ctx context.Context, p Proof, flowID string) (IssuedReceipt, error) {
	if p.NationalID == "" {
		return IssuedReceipt{}, ErrNotProven
	}
	fs, err := s.flows.FlowsOfPerson(ctx, p.NationalID)
	if err != nil {
		return IssuedReceipt{}, err
	}
	for _, f := range fs {
		if f.ID != flowID {
			continue
		}
		ref := FlowRef{OrganizationID: f.OrganizationID, FlowID: f.ID}
		return s.withdraw(ctx, ref, p, func(tx database.Tx) error {
			return s.audit.RecordPersonPageTx(ctx, tx, f.OrganizationID, ActionPersonPageWithdrawal, []string{f.ReferenceID})
		})
	}
	return IssuedReceipt{}, ErrNotYours
}

// MyReferenceAt implements PersonPage.
func (s *JourneyService) MyReferenceAt(ctx context.Context, p Proof, organizationID string) (string, error) {
	if p.NationalID == "" {
		return "", ErrNotProven
	}
	fs, err := s.flows.FlowsOfPerson(ctx, p.NationalID)
	if err != nil {
		return "", err
	}
	ref := ""
	err = database.WithTx(ctx, s.db, func(tx database.Tx) error {
		for _, f := range fs {
			if f.OrganizationID != organizationID {
				continue
			}
			text, err := s.textTx(ctx, tx, f)
			if err != nil {
				return err
			}
			if _, err := s.assurance(text.AssuranceLevel, p.ACR); err == nil {
				ref = f.ReferenceID
				return nil
			}
		}
		return ErrNotYours
	})
	return ref, err
}

// DaysLeft is how many days from now until t as a reader of the two dates
// in loc counts them: the calendar days from today's date to t's, whatever
// the hours of either and however long daylight saving makes the days
// between, so that "7 March" read on 7 December is 90 days away. It is 0
// once t's date has come or t has passed.
func DaysLeft(t, now time.Time, loc *time.Location) int {
	if !t.After(now) {
		return 0
	}
	midnight := func(x time.Time) time.Time {
		x = x.In(loc)
		return time.Date(x.Year(), x.Month(), x.Day(), 0, 0, 0, 0, time.UTC)
	}
	return int(midnight(t).Sub(midnight(now)) / (24 * time.Hour))
}

// nameResources gives the consent tokens' uses in out their resources'
// registered names, in one read when there are any.
func (s *JourneyService) nameResources(ctx context.Context, out []MyConsent) error {
	var uris []string
	for _, m := range out {
		for _, h := range m.History {
			if h.Resource != "" && !slices.Contains(uris, h.Resource) {
				uris = append(uris, h.Resource)
			}
		}
	}
	if len(uris) == 0 {
		return nil
	}
	var rows []resources.Resource
	err := database.WithTx(ctx, s.db, func(tx database.Tx) (err error) {
		rows, err = resources.ByURIs(ctx, tx, uris)
		return err
	})
	if err != nil {
		return err
	}
	for i := range out {
		for j, h := range out[i].History {
			if k := slices.IndexFunc(rows, func(r resources.Resource) bool { return r.URI == h.Resource }); k >= 0 {
				out[i].History[j].ResourceName = rows[k].Name
			}
		}
	}
	return nil
}
