package consent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent/internal/definitions"
	"github.com/flowd/flowd/modules/flows"
)

// DefinitionStore implements Definitions on PostgreSQL, and pins new flows'
// definitions for the flows module (flows.Definitions).
type DefinitionStore struct {
	pool     *pgxpool.Pool
	orgs     OrganizationNames
	versions *keptVersions
}

var (
	_ Definitions       = (*DefinitionStore)(nil)
	_ Texts             = (*DefinitionStore)(nil)
	_ flows.Definitions = (*DefinitionStore)(nil)
)

// NewDefinitions returns the consent definitions; orgs names the
// organization in its default definition's text and as the recipient.
func NewDefinitions(pool *pgxpool.Pool, orgs OrganizationNames) *DefinitionStore {
	return &DefinitionStore{pool: pool, orgs: orgs, versions: newKeptVersions()}
}

// defaultDraft is the text every organization's default definition starts
// with: what the consent page said before definitions existed.
func defaultDraft(organizationName string) Draft {
	n := organizationName
	return Draft{
		Title: Text{EN: n + " asks for your consent", NB: n + " ber om ditt samtykke"},
		Purpose: Text{
			EN: n + " asks for your consent to the request you received this link for.\n\n" +
				"If you accept, " + n + " is told that you consent. If you reject, it is told that you do not.",
			NB: n + " ber om ditt samtykke til forespørselen du fikk denne lenken for.\n\n" +
				"Hvis du godtar, får " + n + " vite at du samtykker. Hvis du avslår, får de vite at du ikke gjør det.",
		},
		AssuranceLevel: assurance.Low,
	}
}

// ensureDefault makes the organization's default definition unless it has
// one. It commits on its own, so that a caller's rollback cannot undo it.
func (s *DefinitionStore) ensureDefault(ctx context.Context, organizationID string) error {
	has, err := definitions.HasDefault(ctx, s.pool, organizationID)
	if err != nil || has {
		return err
	}
	return database.WithTx(ctx, s.pool, func(tx database.Tx) error { return s.insertDefault(ctx, tx, organizationID) })
}

// insertDefault makes the organization's default definition in tx, unless
// another transaction made it first.
func (s *DefinitionStore) insertDefault(ctx context.Context, tx database.Tx, organizationID string) error {
	name, err := s.orgs.OrganizationName(ctx, organizationID)
	if err != nil {
		return fmt.Errorf("consent: default definition: %w", err)
	}
	v, err := build(defaultDraft(name), name, DefaultDefinitionID, 1, "flowd")
	if err != nil {
		return err
	}
	if _, err := definitions.Insert(ctx, tx, definitions.Definition{OrganizationID: organizationID,
		ID: DefaultDefinitionID, Default: true}, toRow(organizationID, v)); err != nil {
		return fmt.Errorf("consent: default definition: %w", err)
	}
	return nil
}

// build turns a draft into version n of definition id; an empty recipient
// is the organization.
func build(d Draft, organizationName, id string, n int, by string) (Version, error) {
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		return Version{}, err
	}
	validity, _ := ParseValidity(d.Validity) // checked by Validate
	retention, _ := ParseValidity(d.Retention)
	v := Version{DefinitionID: id, Version: n, Tag: d.Tag, Title: d.Title, Purpose: d.Purpose,
		DataCategories: d.DataCategories, Recipient: d.Recipient, Validity: validity, Retention: retention,
		AssuranceLevel: d.AssuranceLevel, WithdrawalConsequences: d.WithdrawalConsequences, PublishedBy: by,
		Resources: d.Resources, Parameters: d.Parameters,
		// PostgreSQL keeps microseconds: what is returned equals what is read back.
		PublishedAt: time.Now().Truncate(time.Microsecond)}
	if v.Recipient == "" {
		v.Recipient = organizationName
	}
	if v.AssuranceLevel == "" {
		v.AssuranceLevel = assurance.Substantial
	}
	v.TextSHA256 = v.hashText()
	return v, nil
}

func toRow(organizationID string, v Version) definitions.Version {
	r := definitions.Version{OrganizationID: organizationID, DefinitionID: v.DefinitionID, Version: v.Version,
		TitleEN: v.Title.EN, TitleNB: v.Title.NB, PurposeEN: v.Purpose.EN, PurposeNB: v.Purpose.NB,
		DataCategories: make([]definitions.Category, len(v.DataCategories)), Recipient: v.Recipient,
		AssuranceLevel: string(v.AssuranceLevel), TextSHA256: v.TextSHA256, PublishedBy: v.PublishedBy,
		PublishedAt: v.PublishedAt}
	for i, c := range v.DataCategories {
		r.DataCategories[i] = definitions.Category(c)
	}
	if !v.WithdrawalConsequences.IsZero() {
		c := definitions.Category(v.WithdrawalConsequences)
		r.WithdrawalConsequences = &c
	}
	r.Resources = v.Resources
	for _, p := range v.Parameters {
		r.Parameters = append(r.Parameters, definitions.Parameter{Name: p.Name, Label: definitions.Category(p.Label)})
	}
	if v.Tag != "" {
		r.Tag = &v.Tag
	}
	if !v.Validity.IsZero() {
		s := v.Validity.String()
		r.Validity = &s
	}
	if !v.Retention.IsZero() {
		s := v.Retention.String()
		r.Retention = &s
	}
	return r
}

func fromRow(r definitions.Version) Version {
	v := Version{DefinitionID: r.DefinitionID, Version: r.Version, Title: Text{EN: r.TitleEN, NB: r.TitleNB},
		Purpose: Text{EN: r.PurposeEN, NB: r.PurposeNB}, Recipient: r.Recipient,
		AssuranceLevel: assurance.Level(r.AssuranceLevel), TextSHA256: r.TextSHA256, PublishedBy: r.PublishedBy,
		PublishedAt: r.PublishedAt}
	for _, c := range r.DataCategories {
		v.DataCategories = append(v.DataCategories, Text(c))
	}
	if r.WithdrawalConsequences != nil {
		v.WithdrawalConsequences = Text(*r.WithdrawalConsequences)
	}
	if len(r.Resources) > 0 {
		v.Resources = r.Resources
	}
	for _, p := range r.Parameters {
		v.Parameters = append(v.Parameters, Parameter{Name: p.Name, Label: Text(p.Label)})
	}
	if r.Tag != nil {
		v.Tag = *r.Tag
	}
	if r.Validity != nil {
		v.Validity, _ = ParseValidity(*r.Validity) // stored valid
	}
	if r.Retention != nil {
		v.Retention, _ = ParseValidity(*r.Retention) // stored valid
	}
	return v
}

func fromDefinitionRow(d definitions.Definition) Definition { return Definition(d) }

// List implements Definitions.
func (s *DefinitionStore) List(ctx context.Context, organizationID string) ([]Published, error) {
	if err := s.ensureDefault(ctx, organizationID); err != nil {
		return nil, err
	}
	defs, vers, err := definitions.List(ctx, s.pool, organizationID)
	if err != nil {
		return nil, err
	}
	out := make([]Published, len(defs))
	for i := range defs {
		out[i] = Published{Definition: fromDefinitionRow(defs[i]), Version: fromRow(vers[i])}
	}
	return out, nil
}

// Get implements Definitions.
func (s *DefinitionStore) Get(ctx context.Context, organizationID, id string, n int) (Published, error) {
	if !ValidDefinitionID(id) || n < 0 {
		return Published{}, ErrDefinitionNotFound
	}
	if err := s.ensureDefault(ctx, organizationID); err != nil {
		return Published{}, err
	}
	d, err := definitions.Get(ctx, s.pool, organizationID, id, false)
	if err != nil {
		return Published{}, definitionNotFound(err)
	}
	if n == 0 {
		n = d.LatestVersion
	}
	v, err := definitions.GetVersion(ctx, s.pool, organizationID, id, n)
	if err != nil {
		return Published{}, definitionNotFound(err)
	}
	return Published{Definition: fromDefinitionRow(d), Version: fromRow(v)}, nil
}

func definitionNotFound(err error) error {
	if errors.Is(err, database.ErrNotFound) {
		return ErrDefinitionNotFound
	}
	return err
}

// Create implements Definitions.
func (s *DefinitionStore) Create(ctx context.Context, a Author, id string, d Draft, before ...database.BeforeCommit[Published]) (Published, error) {
	name, err := s.orgs.OrganizationName(ctx, a.OrganizationID)
	if err != nil {
		return Published{}, err
	}
	v, err := build(d, name, id, 1, a.By)
	if !ValidDefinitionID(id) {
		err = withField(err, "id", "must be 1 to 64 lowercase letters, digits and inner hyphens, such as mortgage-data-sharing")
	}
	if err != nil {
		return Published{}, err
	}
	if err := s.ensureDefault(ctx, a.OrganizationID); err != nil {
		return Published{}, err
	}
	if err := unknownResources(ctx, s.pool, "resources", v.Resources); err != nil {
		return Published{}, err
	}
	var out Published
	err = database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		created, err := definitions.Insert(ctx, tx, definitions.Definition{OrganizationID: a.OrganizationID, ID: id}, toRow(a.OrganizationID, v))
		if err != nil {
			return err
		}
		if !created {
			return apperr.New(apperr.Conflict, "The organization already has a consent definition %q; publish a new version of it instead.", id)
		}
		def, err := definitions.Get(ctx, tx, a.OrganizationID, id, false)
		if err != nil {
			return err
		}
		out = Published{Definition: fromDefinitionRow(def), Version: v}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return Published{}, err
	}
	return out, nil
}

// withField adds field's problem to err, an apperr Invalid error or nil.
func withField(err error, field, message string) error {
	fields := apperr.Fields{{Field: field, Message: message}}
	if e, ok := apperr.As(err); ok {
		fields = append(fields, e.Fields...)
	}
	return fields.Err()
}

// Publish implements Definitions. The definition's row is held while the
// version is added, so that two publishes cannot take the same number.
func (s *DefinitionStore) Publish(ctx context.Context, a Author, id string, d Draft, before ...database.BeforeCommit[Published]) (Published, error) {
	if !ValidDefinitionID(id) {
		return Published{}, ErrDefinitionNotFound
	}
	name, err := s.orgs.OrganizationName(ctx, a.OrganizationID)
	if err != nil {
		return Published{}, err
	}
	if v, err := build(d, name, id, 1, a.By); err != nil {
		return Published{}, err // bad input answers before anything is locked
	} else if err := unknownResources(ctx, s.pool, "resources", v.Resources); err != nil {
		return Published{}, err
	}
	if err := s.ensureDefault(ctx, a.OrganizationID); err != nil {
		return Published{}, err
	}
	var out Published
	err = database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		def, err := definitions.Get(ctx, tx, a.OrganizationID, id, true)
		if err != nil {
			return definitionNotFound(err)
		}
		if def.RetiredAt != nil {
			return apperr.New(apperr.Conflict, "The consent definition %q is retired; it takes no new versions.", id)
		}
		v, err := build(d, name, id, def.LatestVersion+1, a.By)
		if err != nil {
			return err
		}
		if err := definitions.Publish(ctx, tx, toRow(a.OrganizationID, v)); err != nil {
			return err
		}
		def.LatestVersion = v.Version
		out = Published{Definition: fromDefinitionRow(def), Version: v}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	return out, err
}

// Retire implements Definitions.
func (s *DefinitionStore) Retire(ctx context.Context, a Author, id string, cond etag.IfMatch, before ...database.BeforeCommit[Definition]) (Definition, error) {
	if !ValidDefinitionID(id) {
		return Definition{}, ErrDefinitionNotFound
	}
	if err := s.ensureDefault(ctx, a.OrganizationID); err != nil {
		return Definition{}, err
	}
	var out definitions.Definition
	err := database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		// The row is held from the check of cond to the retirement, so that
		// no publish or other retirement comes between them.
		def, err := definitions.Get(ctx, tx, a.OrganizationID, id, true)
		if err != nil {
			return definitionNotFound(err)
		}
		d := fromDefinitionRow(def)
		if err := cond.Check(d.ETag(d.LatestVersion)); err != nil {
			return err
		}
		if def.Default {
			return apperr.New(apperr.Conflict, "The default consent definition cannot be retired: flows that name no definition use it.")
		}
		if out, err = definitions.Retire(ctx, tx, a.OrganizationID, id); err != nil {
			return definitionNotFound(err)
		}
		return database.RunBeforeCommit(ctx, tx, fromDefinitionRow(out), before)
	})
	return fromDefinitionRow(out), err
}

// Preview implements Definitions.
func (s *DefinitionStore) Preview(ctx context.Context, organizationID, id string, d Draft) (Version, error) {
	name, err := s.orgs.OrganizationName(ctx, organizationID)
	if err != nil {
		return Version{}, err
	}
	n := 1
	if p, err := s.Get(ctx, organizationID, id, 0); err == nil {
		n = p.Definition.LatestVersion + 1
	} else if !errors.Is(err, ErrDefinitionNotFound) {
		return Version{}, err
	}
	v, err := build(d, name, id, n, "")
	if err != nil {
		return Version{}, err
	}
	return v, unknownResources(ctx, s.pool, "resources", v.Resources)
}

// PinTx implements flows.Definitions.
func (s *DefinitionStore) PinTx(ctx context.Context, tx database.Tx, organizationID, id string, n int) (flows.PinnedDefinition, error) {
	if id != "" && !ValidDefinitionID(id) {
		return flows.PinnedDefinition{}, unknownDefinition(id)
	}
	p, err := definitions.Pin(ctx, tx, organizationID, id, n)
	if errors.Is(err, database.ErrNotFound) && (id == "" || id == DefaultDefinitionID) {
		// The organization's first flow makes its default, in the create's
		// own transaction: it may hold the only connection there is.
		if err := s.insertDefault(ctx, tx, organizationID); err != nil {
			return flows.PinnedDefinition{}, err
		}
		p, err = definitions.Pin(ctx, tx, organizationID, id, n)
	}
	switch {
	case errors.Is(err, database.ErrNotFound):
		return flows.PinnedDefinition{}, unknownDefinition(id)
	case err != nil:
		return flows.PinnedDefinition{}, err
	case p.Definition.RetiredAt != nil:
		return flows.PinnedDefinition{}, apperr.New(apperr.Conflict,
			"The consent definition %q is retired; new flows cannot use it.", p.Definition.ID)
	case p.Version == 0:
		return flows.PinnedDefinition{}, apperr.InvalidFields([]apperr.FieldError{{Field: "flowDefinitionVersion",
			Message: fmt.Sprintf("is not a published version of %q, whose versions are 1 to %d", p.Definition.ID, p.Definition.LatestVersion)}})
	}
	out := flows.PinnedDefinition{ID: p.Definition.ID, Version: p.Version}
	for _, param := range p.Parameters {
		out.Parameters = append(out.Parameters, param.Name)
	}
	if p.Tag != nil {
		out.Tag = *p.Tag
	}
	return out, nil
}

func unknownDefinition(id string) error {
	return apperr.InvalidFields([]apperr.FieldError{{Field: "flowDefinitionId",
		Message: fmt.Sprintf("%q is not a consent definition of this organization", id)}})
}

// DataCategories implements flows.Definitions.
func (s *DefinitionStore) DataCategories(ctx context.Context, organizationID, id string, n int) ([][]string, error) {
	v, err := s.Version(ctx, organizationID, id, n)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(v.DataCategories))
	for i, c := range v.DataCategories {
		out[i] = []string{c.EN, c.NB}
	}
	return out, nil
}
