package consent

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
)

// ErrNotProven means a decision came without a proven identity while proof
// is required: the individual must sign in first.
var ErrNotProven = errors.New("no identity proven for the consent request")

// ErrWrongPerson means the proven identity is not the one the flow is for.
var ErrWrongPerson = errors.New("the proven identity does not match the consent request")

// ClosedError is the ErrClosed of a decision that came too late; Closure
// says why, so that the page can tell the individual.
type ClosedError struct{ Closure Closure }

func (e *ClosedError) Error() string { return ErrClosed.Error() + ": " + string(e.Closure) }

// Is makes errors.Is(err, ErrClosed) hold for every ClosedError.
func (e *ClosedError) Is(target error) bool { return target == ErrClosed }

// Closure says why a request can no longer be answered.
type Closure string

const (
	Open Closure = ""
	// Decided: accepted or rejected. The link then shows the answer and its
	// receipts, and offers an acceptance's withdrawal.
	Decided   Closure = "decided"
	Cancelled Closure = "cancelled"
	Expired   Closure = "expired"
	Withdrawn Closure = "withdrawn"
)

// Request is a consent request as its individual sees it.
type Request struct {
	FlowID         string
	OrganizationID string
	// OrganizationName is the organization's registered name: who asks.
	// The data's recipient is Text.Recipient.
	OrganizationName string
	ReferenceID      string
	ReferenceName    string // the flow's own name for the request; empty when not set
	MaskedNationalID string
	NationalIDEnd    string // the last two characters, for screen readers; empty for shorter ids
	ExpiresAt        time.Time
	Status           flows.ConsentStatus
	Closure          Closure
	RedirectURL      string
	// Text is the pinned definition version: what the person consents to.
	Text Version
	// Parameters are the flow's values of Text's parameters.
	Parameters map[string]string
	// DecidedAt and ValidUntil are the decision's, once decided.
	DecidedAt  *time.Time
	ValidUntil *time.Time

	// person is the canonical form of the flow's national id.
	person string
}

// matches reports, in constant time, whether provenPerson, the canonical
// form of a proven national id, is the person the request is for.
func (r Request) matches(provenPerson string) bool {
	return len(r.person) > 0 && subtle.ConstantTimeCompare([]byte(r.person), []byte(provenPerson)) == 1
}

// Proof is who the eID proved the individual to be.
type Proof struct {
	NationalID string
	ACR        string // the ID token's acr claim
	// Session names the sign-in the proof came from, by a reference that
	// does not give the session away: the audit log tells sign-ins apart
	// by it. Empty when unknown.
	Session string
	// Skip is set when proof is turned off (FLOWD_CONSENT_AUTH=none): any
	// answer counts, and none records an assurance level.
	Skip bool
}

// Answer is the individual's decision as the page sent it.
type Answer struct {
	Accept bool
	// Language is the language the text was shown in, "en" or "nb"; any
	// other value is recorded as "en", the page's fallback.
	Language string
}

// Decision is a recorded answer and where to send the individual next.
type Decision struct {
	Accepted    bool
	RedirectURL string // the organization's redirectUrl with flowId, referenceId and status added
}

// IssuedReceipt is a receipt as the person gets it: the JWS to keep and
// what it says.
type IssuedReceipt struct {
	JWS string
	receipts.Verified
}

// Journey is the individual's side of a flow, reached by its link token.
type Journey interface {
	// Visit returns the request behind token; the first visit of an open
	// request moves it to Opened. ErrUnknownLink.
	Visit(ctx context.Context, token string) (Request, error)
	// CheckPerson reports whether provenNationalID is the person req is
	// for, comparing in constant time; a mismatch is recorded (without either
	// national id) and is ErrWrongPerson.
	CheckPerson(ctx context.Context, req Request, provenNationalID string) error
	// CheckAssurance reports whether a sign-in with acr reaches the level
	// req's definition requires: nil, or an *AssuranceError.
	CheckAssurance(req Request, acr string) error
	// Decide records the final answer of the person p proves, with the
	// evidence of the text they saw: its hash, the language, the assurance
	// level reached and, for an acceptance with a validity, when it ends.
	// ErrUnknownLink, ErrNotProven (no identity yet), ErrWrongPerson, an
	// *AssuranceError, and a *ClosedError (which errors.Is ErrClosed) when
	// the request was decided, cancelled or expired.
	Decide(ctx context.Context, token string, p Proof, a Answer) (Decision, error)
	// IdentityProvenAt returns when a flow's person first proved who they
	// are, or nil, for the console's timeline. ErrUnknownLink.
	IdentityProvenAt(ctx context.Context, f FlowRef) (*time.Time, error)
	// Receipts returns the receipts of req's decision and withdrawal,
	// oldest first, for the person to keep.
	Receipts(ctx context.Context, req Request) ([]IssuedReceipt, error)
	// Withdraw withdraws the acceptance behind token for the person p proves
	// (flow.withdrawn) and returns the withdrawal's receipt. The proof is
	// checked as for Decide; a request that is not an acceptance is a
	// *ClosedError. ErrUnknownLink, ErrNotProven, ErrWrongPerson, *AssuranceError.
	Withdraw(ctx context.Context, token string, p Proof) (IssuedReceipt, error)
}

// LinkStore finds the flow behind a consent link token and keeps when the
// request's person first proved who they are.
type LinkStore interface {
	// FlowForToken returns the flow of token. ErrUnknownLink.
	FlowForToken(ctx context.Context, token string) (FlowRef, error)
	// MarkIdentityProvenTx records, in tx, the first proof of the flow's person.
	MarkIdentityProvenTx(ctx context.Context, tx database.Tx, f FlowRef) error
	// URLTx returns the flow's consent link, read in tx. ErrUnknownLink.
	URLTx(ctx context.Context, tx database.Tx, f FlowRef) (string, error)
	// QueueURL adds the read of the flow's consent link to read; the
	// function gives it once read is done. ErrUnknownLink.
	QueueURL(read database.SharedRead, organizationID, flowID string) func() (string, error)
	// IdentityProvenAt returns when the flow's person first proved who they
	// are, or nil. ErrUnknownLink.
	IdentityProvenAt(ctx context.Context, f FlowRef) (*time.Time, error)
}

// Flows is what the consent module needs of the flows module: the flow
// behind a request, read and locked once in consent's transaction, and the
// decision or withdrawal consent made, recorded in the same transaction.
// Nothing here calls back into consent: flows records what it is handed.
type Flows interface {
	// MarkOpenedTx locks the flow in tx and moves it from Unopened to Opened
	// (flow.opened) while it can still be answered; it returns the flow as it
	// then is. flows.ErrNotFound.
	MarkOpenedTx(ctx context.Context, tx database.Tx, organizationID, flowID string) (flows.Flow, error)
	// LockTx reads the flow locked in tx, with its open incidents and its
	// latest receipt's id, and checks cond against its ETag under the lock.
	// flows.ErrNotFound, apperr PreconditionFailed.
	LockTx(ctx context.Context, tx database.Tx, organizationID, flowID string, cond etag.IfMatch) (flows.Locked, error)
	// RecordDecisionTx records d and its signed receipt on the flow locked in
	// tx (flow.accepted or flow.rejected). flows.ErrNotActive when the flow
	// can no longer be answered at d.At.
	RecordDecisionTx(ctx context.Context, tx database.Tx, d flows.Decision, receipt flows.SignedReceipt) (flows.Flow, error)
	// RecordWithdrawalTx records w and its signed receipt on the flow locked
	// in tx (flow.withdrawn). flows.ErrNotAccepted.
	RecordWithdrawalTx(ctx context.Context, tx database.Tx, w flows.Withdrawal, receipt flows.SignedReceipt) (flows.Flow, error)
	// AttachmentsTx lists the flow's attachments with their bodies.
	AttachmentsTx(ctx context.Context, tx database.Tx, f flows.Flow) ([]flows.Attachment, error)
	// QueueAttachments adds to b the read of the flow's attachments with
	// their bodies; the function gives them once b is sent.
	QueueAttachments(b *database.Batch, f flows.Flow) func() ([]flows.Attachment, error)
	// QueueUses adds to b the read of up to limit of the flow's recorded
	// uses, latest first; the function gives them once b is sent.
	QueueUses(b *database.Batch, f flows.Flow, limit int) func() ([]flows.Use, error)
	// FlowsOfPerson returns the flows addressed to a national id in every
	// organization, newest first, found by their blind index, for the
	// person's own page alone.
	FlowsOfPerson(ctx context.Context, nationalID string) ([]flows.Flow, error)
	// CanonicalNationalID returns the canonical form of a national id, in
	// which flows compares people (flows.Flow.Person), or an error when it
	// is no number of the configured format.
	CanonicalNationalID(nationalID string) (string, error)
}

// Texts gives consent the definition version a flow pinned, read in
// consent's own transaction.
type Texts interface {
	// VersionTx returns version n of the organization's definition id.
	// ErrDefinitionNotFound.
	VersionTx(ctx context.Context, tx database.Tx, organizationID, id string, n int) (Version, error)
	// Version is VersionTx outside any transaction.
	Version(ctx context.Context, organizationID, id string, n int) (Version, error)
}

// OrganizationNames gives an organization's registered name: in its
// default definition's text, as a definition's recipient unless it names
// another, on the consent page and in receipts.
type OrganizationNames interface {
	OrganizationName(ctx context.Context, organizationID string) (string, error)
}

// MismatchRecorder keeps a durable record of someone proving an identity
// that is not the one a request is for, in the organization's audit log.
type MismatchRecorder interface {
	// RecordIdentityMismatchTx records the mismatch in tx.
	RecordIdentityMismatchTx(ctx context.Context, tx database.Tx, organizationID, flowID, referenceID string) error
}

// Audit is the organizations' audit log, as the consent journey and the
// person's own page write to it.
type Audit interface {
	MismatchRecorder
	PersonPageRecorder
}

// JourneyDB is what the journey sends its statements on: the pool.
type JourneyDB interface {
	database.Beginner
	database.Batcher
}

// JourneyService implements Journey and PersonPage on the flows module.
type JourneyService struct {
	db    JourneyDB
	links LinkStore
	recorder
	orgs  OrganizationNames
	audit Audit
	acr   assurance.ACRMap
	log   *slog.Logger
}

// NewJourney returns the consent journey; receiptService signs and checks the
// decisions' receipts, orgs names the organization that asks, and acr reads
// the eID's acr claims as assurance levels.
func NewJourney(db JourneyDB, links LinkStore, flowsModule Flows, texts Texts, receiptService *receipts.Service,
	orgs OrganizationNames, audit Audit, acr assurance.ACRMap, log *slog.Logger) *JourneyService {
	return &JourneyService{db: db, links: links, recorder: recorder{flows: flowsModule, texts: texts, receipts: receiptService},
		orgs: orgs, audit: audit, acr: acr, log: log}
}

// Visit implements Journey.
func (s *JourneyService) Visit(ctx context.Context, token string) (Request, error) {
	ref, err := s.links.FlowForToken(ctx, token)
	if err != nil {
		return Request{}, err
	}
	var (
		f    flows.Flow
		text Version
	)
	err = database.WithTx(ctx, s.db, func(tx database.Tx) (err error) {
		if f, err = s.flows.MarkOpenedTx(ctx, tx, ref.OrganizationID, ref.FlowID); err != nil {
			return err
		}
		text, err = s.textTx(ctx, tx, f)
		return err
	})
	if errors.Is(err, flows.ErrNotFound) {
		return Request{}, ErrUnknownLink
	}
	if err != nil {
		return Request{}, err
	}
	req := s.request(f, text)
	if req.OrganizationName, err = s.orgs.OrganizationName(ctx, f.OrganizationID); err != nil {
		return Request{}, fmt.Errorf("consent: the organization of flow %s: %w", f.ID, err)
	}
	return req, nil
}

// Decide implements Journey. The flow is locked for the whole decision, so
// two tabs or a double submit cannot record two answers. The proof of
// identity is recorded in the decision's transaction; so is a mismatch,
// which commits although nothing is decided.
func (s *JourneyService) Decide(ctx context.Context, token string, p Proof, a Answer) (Decision, error) {
	ref, err := s.links.FlowForToken(ctx, token)
	if err != nil {
		return Decision{}, err
	}
	var (
		decided     flows.Flow
		wrongPerson bool
	)
	err = database.WithTx(ctx, s.db, func(tx database.Tx) error {
		locked, err := s.flows.LockTx(ctx, tx, ref.OrganizationID, ref.FlowID, etag.Any)
		if err != nil {
			return err
		}
		f, at := locked.Flow, time.Now()
		if why := closure(f, at); why != Open {
			return &ClosedError{Closure: why}
		}
		text, err := s.textTx(ctx, tx, f)
		if err != nil {
			return err
		}
		level, err := s.proveTx(ctx, tx, f, text, p)
		if errors.Is(err, ErrWrongPerson) {
			wrongPerson = true
			return nil // the mismatch's record commits
		}
		if err != nil {
			return err
		}
		d := flows.Decision{OrganizationID: f.OrganizationID, FlowID: f.ID, Accepted: a.Accept, At: at,
			Evidence: flows.Evidence{TextSHA256: text.TextSHA256With(f.Parameters), Language: shownIn(a.Language)}}
		if a.Accept {
			d.Evidence.ValidUntil = text.ValidUntil(at)
		}
		if !p.Skip {
			d.Evidence.AssuranceLevel, d.Evidence.ACR = string(level), p.ACR
		}
		decided, err = s.decideTx(ctx, tx, f, text, d)
		if errors.Is(err, flows.ErrNotActive) {
			// The flow is locked and was open at d.At: only a clock that
			// disagrees with ours can have closed it since.
			return &ClosedError{Closure: Expired}
		}
		return err
	})
	switch {
	case errors.Is(err, flows.ErrNotFound):
		return Decision{}, ErrUnknownLink
	case err != nil:
		return Decision{}, err
	case wrongPerson:
		return Decision{}, ErrWrongPerson
	}
	return Decision{Accepted: a.Accept, RedirectURL: redirectWithOutcome(decided, a.Accept)}, nil
}

// proveTx checks that p proves the person f is for, at text's assurance
// level, recording the proof or the mismatch in tx, and returns the level
// reached. With proof turned off, anyone passes.
func (s *JourneyService) proveTx(ctx context.Context, tx database.Tx, f flows.Flow, text Version, p Proof) (assurance.Level, error) {
	if p.Skip {
		return "", nil
	}
	if p.NationalID == "" {
		return "", ErrNotProven
	}
	req := Request{FlowID: f.ID, OrganizationID: f.OrganizationID, ReferenceID: f.ReferenceID, person: f.Person}
	matched, err := s.checkPersonTx(ctx, tx, req, p.NationalID)
	if err == nil && !matched {
		err = ErrWrongPerson
	}
	if err != nil {
		return "", err
	}
	return s.assurance(text.AssuranceLevel, p.ACR)
}

// Withdraw implements Journey. Like a decision, a mismatch's record commits
// although nothing is withdrawn.
func (s *JourneyService) Withdraw(ctx context.Context, token string, p Proof) (IssuedReceipt, error) {
	ref, err := s.links.FlowForToken(ctx, token)
	if err != nil {
		return IssuedReceipt{}, err
	}
	return s.withdraw(ctx, ref, p)
}

// withdraw withdraws the acceptance of the flow ref for the person p
// proves; also, in the withdrawal's transaction, runs each of also.
func (s *JourneyService) withdraw(ctx context.Context, ref FlowRef, p Proof, also ...func(tx database.Tx) error) (IssuedReceipt, error) {
	var (
		receipt     flows.SignedReceipt
		wrongPerson bool
	)
	err := database.WithTx(ctx, s.db, func(tx database.Tx) error {
		locked, err := s.flows.LockTx(ctx, tx, ref.OrganizationID, ref.FlowID, etag.Any)
		if err != nil {
			return err
		}
		f := locked.Flow
		if f.ConsentStatus != flows.Accepted {
			return &ClosedError{Closure: closure(f, time.Now())}
		}
		text, err := s.textTx(ctx, tx, f)
		if err != nil {
			return err
		}
		_, err = s.proveTx(ctx, tx, f, text, p)
		if errors.Is(err, ErrWrongPerson) {
			wrongPerson = true
			return nil // the mismatch's record commits
		}
		if err != nil {
			return err
		}
		if _, receipt, err = s.withdrawTx(ctx, tx, locked, text, flows.ByIndividual); err != nil {
			return err
		}
		for _, run := range also {
			if err := run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, flows.ErrNotFound):
		return IssuedReceipt{}, ErrUnknownLink
	case err != nil:
		return IssuedReceipt{}, err
	case wrongPerson:
		return IssuedReceipt{}, ErrWrongPerson
	}
	v, err := s.receipts.Verify(ctx, receipt.JWS)
	if err != nil {
		return IssuedReceipt{}, fmt.Errorf("consent: the withdrawal's receipt: %w", err)
	}
	return IssuedReceipt{JWS: receipt.JWS, Verified: v}, nil
}

// Receipts implements Journey.
func (s *JourneyService) Receipts(ctx context.Context, req Request) ([]IssuedReceipt, error) {
	var attachments []flows.Attachment
	err := database.WithTx(ctx, s.db, func(tx database.Tx) (err error) {
		attachments, err = s.flows.AttachmentsTx(ctx, tx, flows.Flow{ID: req.FlowID, OrganizationID: req.OrganizationID})
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []IssuedReceipt
	for _, a := range attachments {
		if a.Kind != flows.KindConsentReceipt {
			continue
		}
		v, err := s.receipts.Verify(ctx, a.Body)
		if err != nil {
			return nil, fmt.Errorf("consent: receipt %s of flow %s: %w", a.ID, req.FlowID, err)
		}
		out = append(out, IssuedReceipt{JWS: a.Body, Verified: v})
	}
	return out, nil
}

// shownIn is the language a decision records: the page's, which is English
// unless Norwegian.
func shownIn(lang string) string {
	if lang == "nb" {
		return "nb"
	}
	return "en"
}

// CheckAssurance implements Journey.
func (s *JourneyService) CheckAssurance(req Request, acr string) error {
	_, err := s.assurance(req.Text.AssuranceLevel, acr)
	return err
}

// assurance returns the level a sign-in with acr reached, or an
// *AssuranceError when it is below required.
func (s *JourneyService) assurance(required assurance.Level, acr string) (assurance.Level, error) {
	level, known := s.acr.Level(acr)
	if !known || !level.Meets(required) {
		return "", &AssuranceError{Required: required, ACR: s.acr.ACR(required)}
	}
	return level, nil
}

// CheckPerson implements Journey. A failure to record the outcome is logged
// and does not change it: a proof is a step of the console's timeline, and
// a mismatch stands in the log.
func (s *JourneyService) CheckPerson(ctx context.Context, req Request, provenNationalID string) error {
	var matched bool
	err := database.WithTx(ctx, s.db, func(tx database.Tx) (err error) {
		matched, err = s.checkPersonTx(ctx, tx, req, provenNationalID)
		return err
	})
	if err != nil {
		s.log.ErrorContext(ctx, "recording a consent identity check", "flow_id", req.FlowID, "error", err.Error())
	}
	if !matched {
		return ErrWrongPerson
	}
	return nil
}

// checkPersonTx reports whether provenNationalID is the person req is for,
// comparing their canonical forms in constant time (an id that is no number
// of the format is nobody's), and records the outcome in tx: the first
// proof on the request, or a mismatch in the organization's audit log. A
// mismatch is also a warning in the log, naming the flow and never a
// national id: the trail of someone signing in to another person's request.
func (s *JourneyService) checkPersonTx(ctx context.Context, tx database.Tx, req Request, provenNationalID string) (bool, error) {
	proven, err := s.flows.CanonicalNationalID(provenNationalID)
	if err == nil && req.matches(proven) {
		return true, s.links.MarkIdentityProvenTx(ctx, tx, FlowRef{OrganizationID: req.OrganizationID, FlowID: req.FlowID})
	}
	s.log.WarnContext(ctx, "consent identity mismatch", "event", "consent.identity_mismatch",
		"flow_id", req.FlowID, "organization_id", req.OrganizationID)
	return false, s.audit.RecordIdentityMismatchTx(ctx, tx, req.OrganizationID, req.FlowID, req.ReferenceID)
}

// IdentityProvenAt implements Journey.
func (s *JourneyService) IdentityProvenAt(ctx context.Context, f FlowRef) (*time.Time, error) {
	return s.links.IdentityProvenAt(ctx, f)
}

func (s *JourneyService) request(f flows.Flow, text Version) Request {
	return Request{Text: text, Parameters: f.Parameters,
		FlowID: f.ID, OrganizationID: f.OrganizationID, ReferenceID: f.ReferenceID,
		ReferenceName: f.ReferenceName, MaskedNationalID: MaskNationalID(f.NationalID), NationalIDEnd: idEnd(f.NationalID),
		ExpiresAt: f.ExpiresAt, Status: f.ConsentStatus, DecidedAt: f.DecidedAt, ValidUntil: f.Evidence.ValidUntil,
		Closure: closure(f, time.Now()), RedirectURL: f.RedirectURL, person: f.Person,
	}
}

// closure says whether f can still be answered at now.
func closure(f flows.Flow, now time.Time) Closure {
	switch {
	case f.ConsentStatus == flows.Withdrawn:
		return Withdrawn
	case f.ConsentStatus == flows.Expired:
		return Expired
	case f.ProcessStatus == flows.Completed || f.ConsentStatus == flows.Accepted || f.ConsentStatus == flows.Rejected:
		return Decided
	case f.ProcessStatus == flows.Cancelled:
		if !f.ExpiresAt.IsZero() && !now.Before(f.ExpiresAt) {
			return Expired
		}
		return Cancelled
	case !f.ExpiresAt.IsZero() && !now.Before(f.ExpiresAt):
		return Expired
	}
	return Open
}

// redirectWithOutcome adds flowId, referenceId and status to the flow's
// redirectUrl, keeping the query it already has.
func redirectWithOutcome(f flows.Flow, accepted bool) string {
	u, err := url.Parse(f.RedirectURL)
	if err != nil {
		return f.RedirectURL // validated at create; cannot happen
	}
	q := u.Query()
	q.Set("flowId", f.ID)
	q.Set("referenceId", f.ReferenceID)
	if accepted {
		q.Set("status", "accepted")
	} else {
		q.Set("status", "rejected")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// MaskNationalID shows only the last two characters of a national id.
func MaskNationalID(id string) string {
	r := []rune(id)
	if len(r) <= 2 {
		return strings.Repeat("•", len(r))
	}
	return strings.Repeat("•", len(r)-2) + string(r[len(r)-2:])
}

func idEnd(id string) string {
	r := []rune(id)
	if len(r) <= 2 {
		return ""
	}
	return string(r[len(r)-2:])
}
