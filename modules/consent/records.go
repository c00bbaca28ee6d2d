package consent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowd/flowd/modules/consent/record"
	"github.com/flowd/flowd/modules/flows"
)

// Records answers a flow's consent record (ISO/IEC TS 27560's shape).
type Records interface {
	// Record returns the consent record of the caller's flow; of a flow
	// deleted or erased, what is left of it, with nothing personal.
	// flows.ErrNotFound for a flow the caller's organization never had.
	Record(ctx context.Context, c flows.Caller, flowID string) (record.Record, error)
}

// RecordFlows is what the consent record needs of the flows module.
type RecordFlows interface {
	Get(ctx context.Context, c flows.Caller, flowID string) (flows.Flow, error)
	Attachments(ctx context.Context, c flows.Caller, flowID string) ([]flows.Attachment, error)
	// DeletionOf returns the deletion log's entry of a flow that is gone.
	// flows.ErrNotFound.
	DeletionOf(ctx context.Context, organizationID, flowID string) (flows.Deletion, error)
}

// Subjects names a person by their receipt subject in an organization,
// of their national id's canonical form: the receipts service.
type Subjects interface {
	Subject(ctx context.Context, organizationID, person string) (string, error)
}

// RecordService makes consent records from the flow, the definition
// version it pinned and the resources that version names.
type RecordService struct {
	flows     RecordFlows
	texts     Texts
	resources Resources
	orgs      OrganizationNames
	subjects  Subjects
	base      string
}

var _ Records = (*RecordService)(nil)

// NewRecords returns the consent records; baseURL is flowd's, under which
// a person withdraws on /my.
func NewRecords(flowsModule RecordFlows, texts Texts, resources Resources, orgs OrganizationNames, subjects Subjects, baseURL string) *RecordService {
	return &RecordService{flows: flowsModule, texts: texts, resources: resources, orgs: orgs, subjects: subjects,
		base: strings.TrimRight(baseURL, "/")}
}

// Record implements Records.
func (s *RecordService) Record(ctx context.Context, c flows.Caller, flowID string) (record.Record, error) {
	f, err := s.flows.Get(ctx, c, flowID)
	if errors.Is(err, flows.ErrNotFound) {
		return s.erased(ctx, c, flowID)
	}
	if err != nil {
		return record.Record{}, err
	}
	attachments, err := s.flows.Attachments(ctx, c, flowID)
	if err != nil {
		return record.Record{}, err
	}
	v, err := s.texts.Version(ctx, f.OrganizationID, f.FlowDefinitionID, f.FlowDefinitionVersion)
	if err != nil {
		return record.Record{}, fmt.Errorf("consent: the definition of a record: %w", err)
	}
	orgName, err := s.orgs.OrganizationName(ctx, f.OrganizationID)
	if err != nil {
		return record.Record{}, err
	}
	subject, err := s.subjects.Subject(ctx, f.OrganizationID, f.Person)
	if err != nil {
		return record.Record{}, err
	}
	holders := make([]Resource, 0, len(v.Resources))
	for _, uri := range v.Resources {
		r, err := s.resources.ResourceByURI(ctx, uri)
		if errors.Is(err, ErrResourceNotFound) {
			r = Resource{URI: uri} // a definition names registered resources only; shown by its URI all the same
		} else if err != nil {
			return record.Record{}, err
		}
		holders = append(holders, r)
	}
	receiptIDs := make([]string, 0, len(attachments))
	for _, a := range attachments {
		if a.Kind == flows.KindConsentReceipt {
			receiptIDs = append(receiptIDs, a.ID)
		}
	}
	return recordOf(f, v, recordFacts{orgName: orgName, subject: subject, holders: holders, receiptIDs: receiptIDs,
		withdrawURL: s.base + "/my", withdrawAPI: "POST " + s.base + "/api/flows/" + f.ID + "/withdraw"}), nil
}

// erased answers the record of a flow that is gone: its id, its receipts'
// ids and when it went, as the deletion log keeps them.
func (s *RecordService) erased(ctx context.Context, c flows.Caller, flowID string) (record.Record, error) {
	d, err := s.flows.DeletionOf(ctx, c.OrganizationID, flowID)
	if err != nil {
		return record.Record{}, err
	}
	orgName, err := s.orgs.OrganizationName(ctx, c.OrganizationID)
	if err != nil {
		return record.Record{}, err
	}
	return record.Record{SchemaVersion: record.SchemaVersion, RecordID: d.FlowID, ReceiptIDs: nonNil(d.ReceiptIDs),
		ConsentStatus: record.Unknown, PIIControllers: []record.Party{{ID: c.OrganizationID, Name: orgName}},
		Events: []record.Event{{EventTime: record.Time(d.DeletedAt), EventType: record.EventErased,
			EventState: record.Unknown, EventBy: record.ByController}}}, nil
}

// recordFacts are what a record tells besides the flow and its version.
type recordFacts struct {
	orgName, subject         string
	holders                  []Resource
	receiptIDs               []string
	withdrawURL, withdrawAPI string
}

// recordOf maps a flow, the version it pinned and the facts around them to
// its consent record.
func recordOf(f flows.Flow, v Version, in recordFacts) record.Record {
	textSHA256 := f.Evidence.TextSHA256
	if len(textSHA256) == 0 {
		textSHA256 = v.TextSHA256With(f.Parameters) // the text the link shows, not yet decided on
	}
	recipients := []record.Recipient{{Role: record.RoleRecipient, Name: v.Recipient}}
	for _, r := range in.holders {
		recipients = append(recipients, record.Recipient{Role: record.RoleDataHolder, Name: r.Name, URI: r.URI, OrganizationID: r.OrganizationID})
	}
	categories := make([]record.Text, len(v.DataCategories))
	for i, c := range v.DataCategories {
		categories[i] = record.Text(c)
	}
	subject := in.subject
	rec := record.Record{
		SchemaVersion: record.SchemaVersion, RecordID: f.ID, ReceiptIDs: nonNil(in.receiptIDs), PIIPrincipalID: &subject,
		Notice: &record.Notice{DefinitionID: f.FlowDefinitionID, DefinitionVersion: f.FlowDefinitionVersion, VersionTag: f.VersionTag,
			Title: record.Text(v.Title), TextSHA256: hex.EncodeToString(textSHA256)},
		Language:       f.Evidence.Language,
		PIIControllers: []record.Party{{ID: f.OrganizationID, Name: in.orgName}},
		Purposes: []record.Purpose{{PurposeID: f.ProcessDefinitionID(), Purpose: record.Text(v.Title), Description: record.Text(v.Purpose),
			LawfulBasis: record.LawfulBasis, PIIInformation: categories, Recipients: recipients,
			ValidityDuration: v.Validity.String(), RetentionPeriod: v.Retention.String()}},
		CollectionMethod: &record.CollectionMethod{Method: record.MethodWebForm},
		Events:           eventsOf(f),
		WithdrawalMethod: &record.WithdrawalMethod{URL: in.withdrawURL, API: in.withdrawAPI},
		Parameters:       f.Parameters,
	}
	rec.ConsentStatus = rec.Events[len(rec.Events)-1].EventState
	if e := f.Evidence; e.AssuranceLevel != "" {
		rec.CollectionMethod.IdentityAssurance = &record.Assurance{Level: e.AssuranceLevel, ACR: e.ACR}
	}
	if u := f.Evidence.ValidUntil; u != nil && f.ConsentStatus != flows.Rejected {
		rec.ValidUntil = record.Time(*u)
	}
	return rec
}

// eventsOf lists the changes of f's consent, oldest first.
func eventsOf(f flows.Flow) []record.Event {
	out := []record.Event{{EventTime: record.Time(f.CreatedAt), EventType: record.EventRequested, EventState: record.Requested, EventBy: record.ByController}}
	add := func(at *time.Time, typ, state, by string) {
		if at != nil {
			out = append(out, record.Event{EventTime: record.Time(*at), EventType: typ, EventState: state, EventBy: by})
		}
	}
	add(f.OpenedAt, record.EventPresented, record.Requested, record.ByPrincipal)
	switch f.ConsentStatus {
	case flows.Rejected:
		add(f.DecidedAt, record.EventRefused, record.Refused, record.ByPrincipal)
	case flows.Accepted, flows.Withdrawn, flows.Expired:
		add(f.DecidedAt, record.EventGiven, record.Given, record.ByPrincipal)
	}
	switch {
	case f.WithdrawnAt != nil && f.WithdrawnBy == flows.ByOrganization:
		add(f.WithdrawnAt, record.EventWithdrawn, record.Revoked, record.ByController)
	case f.WithdrawnAt != nil:
		add(f.WithdrawnAt, record.EventWithdrawn, record.Withdrawn, record.ByPrincipal)
	case f.ExpiredAt != nil:
		add(f.ExpiredAt, record.EventExpired, record.Expired, record.BySystem)
	case f.ProcessStatus == flows.Cancelled && f.DecidedAt == nil:
		// A request cancelled, or whose link expired, unanswered: the
		// flow's last change ended it.
		at := f.UpdatedAt
		add(&at, record.EventCancelled, record.Deferred, record.ByController)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
