package api

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// FlowDefinitionDraft is the body of POST /api/flow-definitions (with ID)
// and POST /api/flow-definitions/:id/versions (without), and what
// `flowd definitions publish` reads.
type FlowDefinitionDraft struct {
	ID             string         `json:"id,omitempty"`
	VersionTag     string         `json:"versionTag"`
	Title          consent.Text   `json:"title"`
	Purpose        consent.Text   `json:"purpose"`
	DataCategories []consent.Text `json:"dataCategories"`
	Recipient      string         `json:"recipient"`
	Validity       string         `json:"validity"`
	Retention      string         `json:"retention"`
	AssuranceLevel string         `json:"assuranceLevel"`
	// WithdrawalConsequences is optional: both languages, or left out.
	WithdrawalConsequences *consent.Text `json:"withdrawalConsequences,omitempty"`
	// Resources and Parameters are optional.
	Resources  []string            `json:"resources,omitempty"`
	Parameters []consent.Parameter `json:"parameters,omitempty"`
}

// Draft is the consent module's draft of d.
func (d FlowDefinitionDraft) Draft() consent.Draft {
	out := consent.Draft{Tag: d.VersionTag, Title: d.Title, Purpose: d.Purpose, DataCategories: d.DataCategories,
		Recipient: d.Recipient, Validity: d.Validity, Retention: d.Retention, AssuranceLevel: assurance.Level(d.AssuranceLevel),
		Resources: d.Resources, Parameters: d.Parameters}
	if d.WithdrawalConsequences != nil {
		out.WithdrawalConsequences = *d.WithdrawalConsequences
	}
	return out
}

// FlowDefinition is a consent definition with one of its versions, as the
// API and `flowd definitions … --json` show it.
type FlowDefinition struct {
	Links struct {
		Self   string `json:"self"`
		Latest string `json:"latest"`
	} `json:"_links"`
	ID             string         `json:"id"`
	Version        int            `json:"version"`
	LatestVersion  int            `json:"latestVersion"`
	Default        bool           `json:"default"`
	RetiredAt      *apiInstant    `json:"retiredAt"`
	CreatedAt      apiInstant     `json:"createdAt"`
	VersionTag     *string        `json:"versionTag"`
	Title          consent.Text   `json:"title"`
	Purpose        consent.Text   `json:"purpose"`
	DataCategories []consent.Text `json:"dataCategories"`
	Recipient      string         `json:"recipient"`
	Validity       *string        `json:"validity"`
	Retention      *string        `json:"retention"`
	AssuranceLevel string         `json:"assuranceLevel"`
	TextSHA256     string         `json:"textSha256"`
	PublishedAt    apiInstant     `json:"publishedAt"`
	PublishedBy    string         `json:"publishedBy"`
	// WithdrawalConsequences is null when the version has none.
	WithdrawalConsequences *consent.Text `json:"withdrawalConsequences"`
	// Resources and Parameters are empty lists when the version has none.
	Resources  []string            `json:"resources"`
	Parameters []consent.Parameter `json:"parameters"`
}

func definitionPath(id string) string { return "/api/flow-definitions/" + url.PathEscape(id) }

// NewFlowDefinition renders p.
func NewFlowDefinition(p consent.Published) FlowDefinition {
	d, v := p.Definition, p.Version
	out := FlowDefinition{ID: d.ID, Version: v.Version, LatestVersion: d.LatestVersion, Default: d.Default,
		RetiredAt: (*apiInstant)(d.RetiredAt), CreatedAt: apiInstant(d.CreatedAt), VersionTag: nonEmpty(v.Tag),
		Title: v.Title, Purpose: v.Purpose, DataCategories: v.DataCategories, Recipient: v.Recipient,
		Validity: nonEmpty(v.Validity.String()), Retention: nonEmpty(v.Retention.String()), AssuranceLevel: string(v.AssuranceLevel),
		TextSHA256: hex.EncodeToString(v.TextSHA256), PublishedAt: apiInstant(v.PublishedAt), PublishedBy: v.PublishedBy}
	if out.DataCategories == nil {
		out.DataCategories = []consent.Text{}
	}
	out.Resources, out.Parameters = v.Resources, v.Parameters
	if out.Resources == nil {
		out.Resources = []string{}
	}
	if out.Parameters == nil {
		out.Parameters = []consent.Parameter{}
	}
	if !v.WithdrawalConsequences.IsZero() {
		out.WithdrawalConsequences = &v.WithdrawalConsequences
	}
	out.Links.Self = definitionPath(d.ID) + "/versions/" + strconv.Itoa(v.Version)
	out.Links.Latest = definitionPath(d.ID)
	return out
}

// definitionError maps the consent module's sentinel errors to application errors.
func definitionError(err error) error {
	if errors.Is(err, consent.ErrDefinitionNotFound) {
		return apperr.New(apperr.NotFound, "No consent definition or version with this id.")
	}
	return err
}

func authorOf(c echo.Context) consent.Author {
	p := httpkit.Principal(c)
	return consent.Author{OrganizationID: p.OrganizationID, By: p.ClientID}
}

// HandleDefinitionList handles "GET /api/flow-definitions": every
// definition of the organization with its latest version, by id.
func (h *Handler) HandleDefinitionList(c echo.Context) error {
	list, err := h.definitions.List(c.Request().Context(), httpkit.Principal(c).OrganizationID)
	if err != nil {
		return err
	}
	out := struct {
		Data []FlowDefinition `json:"data"`
	}{Data: make([]FlowDefinition, len(list))}
	for i, p := range list {
		out.Data[i] = NewFlowDefinition(p)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleDefinitionCreate handles "POST /api/flow-definitions": a new
// definition and its version 1.
func (h *Handler) HandleDefinitionCreate(c echo.Context) error {
	var req FlowDefinitionDraft
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, req.Draft().Normalize().Validate())
	}
	p, err := h.definitions.Create(c.Request().Context(), authorOf(c), req.ID, req.Draft(), keepReply(c, definitionCreated))
	if err != nil {
		return definitionError(err)
	}
	return h.writeReply(c, definitionCreated(p))
}

// definitionCreated answers a new definition or version with it.
func definitionCreated(p consent.Published) reply {
	out := NewFlowDefinition(p)
	return reply{status: http.StatusCreated, header: http.Header{echo.HeaderLocation: {out.Links.Self}, "Etag": {p.ETag()}}, body: out}
}

// HandleDefinitionGet handles "GET /api/flow-definitions/:id" (the latest
// version) and "GET /api/flow-definitions/:id/versions/:version".
func (h *Handler) HandleDefinitionGet(c echo.Context) error {
	n := 0
	if v := c.Param("version"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return definitionError(consent.ErrDefinitionNotFound)
		}
	}
	p, err := h.definitions.Get(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"), n)
	if err != nil {
		return definitionError(err)
	}
	return h.writeResource(c, http.StatusOK, p.ETag(), NewFlowDefinition(p))
}

// HandleDefinitionPublish handles "POST /api/flow-definitions/:id/versions".
func (h *Handler) HandleDefinitionPublish(c echo.Context) error {
	var req FlowDefinitionDraft
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, req.Draft().Normalize().Validate())
	}
	if req.ID != "" && req.ID != c.Param("id") {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "id", Message: "must be left out or be the definition's id"}})
	}
	p, err := h.definitions.Publish(c.Request().Context(), authorOf(c), c.Param("id"), req.Draft(), keepReply(c, definitionCreated))
	if err != nil {
		return definitionError(err)
	}
	return h.writeReply(c, definitionCreated(p))
}

// HandleDefinitionRetire handles "POST /api/flow-definitions/:id/retire":
// no new flows; it answers with the latest version, retiredAt set. The
// version is read first, so that the answer is whole in the retirement's
// transaction (keepReply); a version published in between is a 409.
func (h *Handler) HandleDefinitionRetire(c echo.Context) error {
	cond, err := ifMatch(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	latest, err := h.definitions.Get(ctx, httpkit.Principal(c).OrganizationID, c.Param("id"), 0)
	if err != nil {
		return definitionError(err)
	}
	answer := func(d consent.Definition) reply {
		p := consent.Published{Definition: d, Version: latest.Version}
		return reply{status: http.StatusOK, header: http.Header{"Etag": {p.ETag()}}, body: NewFlowDefinition(p)}
	}
	d, err := h.definitions.Retire(ctx, authorOf(c), c.Param("id"), cond,
		func(_ context.Context, _ database.Tx, d consent.Definition) error {
			if d.LatestVersion != latest.Version.Version {
				return apperr.New(apperr.Conflict, "A new version of the consent definition was published while it was being retired; retry.")
			}
			return nil
		}, keepReply(c, answer))
	if err != nil {
		return definitionError(err)
	}
	return h.writeReply(c, answer(d))
}
