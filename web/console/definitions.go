package console

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

func definitionConsolePath(id string) string { return "/console/definitions/" + url.PathEscape(id) }

// HandleConsoleDefinitions handles "GET /console/definitions".
func (h *Handler) HandleConsoleDefinitions(c echo.Context) error {
	list, err := h.definitions.List(c.Request().Context(), StaffOf(c).OrganizationID)
	if err != nil {
		return err
	}
	p := pages.DefinitionListPage{Frame: h.Frame(c, "definitions", "Consent definitions")}
	for _, d := range list {
		p.Rows = append(p.Rows, pages.DefinitionRow{ID: d.Definition.ID, URL: definitionConsolePath(d.Definition.ID),
			Title: d.Version.Title.EN, Tag: d.Version.Tag, Level: string(d.Version.AssuranceLevel), Version: d.Version.Version,
			Default: d.Definition.Default, Retired: d.Definition.Retired()})
	}
	return h.Render(c, http.StatusOK, pages.DefinitionList(p))
}

// HandleConsoleDefinition handles "GET /console/definitions/:id": a version
// (?version=, the latest by default) beside the one before it.
func (h *Handler) HandleConsoleDefinition(c echo.Context) error {
	ctx := c.Request().Context()
	org := StaffOf(c).OrganizationID
	n, err := strconv.Atoi(c.QueryParam("version"))
	if c.QueryParam("version") != "" && (err != nil || n < 1) {
		return ErrNotFound
	}
	cur, err := h.definitions.Get(ctx, org, c.Param("id"), n)
	if err != nil {
		return NotFound(err, consent.ErrDefinitionNotFound)
	}
	d, v := cur.Definition, cur.Version
	self := definitionConsolePath(d.ID)
	p := pages.DefinitionPage{Frame: h.Frame(c, "definitions", d.ID), ID: d.ID, Version: v.Version, Default: d.Default,
		RetiredAt: TimePtr(d.RetiredAt, "")}
	if !d.Retired() {
		p.PublishURL = self + "/publish"
		if !d.Default {
			p.RetireURL = self + "/retire"
		}
	}
	for i := 1; i <= d.LatestVersion; i++ {
		p.Versions = append(p.Versions, pages.VersionLink{Version: i, URL: self + "?version=" + strconv.Itoa(i), Current: i == v.Version})
	}
	var prev consent.Version
	if v.Version > 1 {
		before, err := h.definitions.Get(ctx, org, d.ID, v.Version-1)
		if err != nil {
			return err
		}
		prev, p.Previous = before.Version, v.Version-1
	}
	p.Rows = compareVersions(v, prev, p.Previous > 0)
	return h.Render(c, http.StatusOK, pages.Definition(p))
}

// compareVersions lists every field of v beside prev's, marking those that
// differ when there is a previous version.
func compareVersions(v, prev consent.Version, hasPrev bool) []pages.CompareRow {
	cur, old := versionFields(v), versionFields(prev)
	rows := make([]pages.CompareRow, len(cur))
	for i, f := range cur {
		rows[i] = pages.CompareRow{Label: f.label, Current: f.value, Code: f.code}
		if hasPrev {
			rows[i].Previous = old[i].value
			// The hash and the publication differ between any two versions.
			rows[i].Changed = f.text != old[i].text && !f.differsAlways
		}
	}
	return rows
}

// versionField is one field of a version as the version page shows it.
type versionField struct {
	label         string
	text          string // what tells a change
	value         pages.CompareValue
	code          bool
	differsAlways bool
}

func versionFields(v consent.Version) []versionField {
	var cats []string
	for _, c := range v.DataCategories {
		cats = append(cats, c.EN+" | "+c.NB)
	}
	validity := v.Validity.String()
	if validity == "" {
		validity = "until withdrawn"
	}
	retention := v.Retention.String()
	if retention == "" {
		retention = "until deleted"
	}
	line := func(label, text string) versionField {
		return versionField{label: label, text: text, value: pages.CompareValue{Text: text}}
	}
	purpose := func(label, text string) versionField {
		return versionField{label: label, text: text, value: pages.CompareValue{Blocks: httpkit.TextBlocksOf(text)}}
	}
	categories := line("Data it covers", "none")
	if len(cats) > 0 {
		categories = versionField{label: "Data it covers", text: strings.Join(cats, "\n"),
			value: pages.CompareValue{Blocks: []pages.TextBlock{{List: true, Lines: cats}}}}
	}
	sha := hex.EncodeToString(v.TextSHA256)
	published := Time(v.PublishedAt) + " by " + v.PublishedBy
	return []versionField{
		line("Version tag", v.Tag),
		line("Title, English", v.Title.EN),
		line("Title, Norwegian", v.Title.NB),
		purpose("Purpose, English", v.Purpose.EN),
		purpose("Purpose, Norwegian", v.Purpose.NB),
		categories,
		line("Recipient", v.Recipient),
		line("Valid for", validity),
		line("Completed flows kept for", retention),
		line("eID level", string(v.AssuranceLevel)),
		purpose("If the person withdraws, English", v.WithdrawalConsequences.EN),
		purpose("If the person withdraws, Norwegian", v.WithdrawalConsequences.NB),
		{label: "Text SHA-256", text: sha, value: pages.CompareValue{Text: sha}, code: true, differsAlways: true},
		{label: "Published", text: published, value: pages.CompareValue{Text: published}, differsAlways: true},
	}
}

// HandleConsoleNewDefinition handles "GET /console/definitions/new" (admins).
func (h *Handler) HandleConsoleNewDefinition(c echo.Context) error {
	return h.Render(c, http.StatusOK, pages.DefinitionForm(h.definitionForm(c, "", true, pages.DefinitionFormPage{Level: "substantial"})))
}

// HandleConsolePublishForm handles "GET /console/definitions/:id/publish"
// (admins): the form, filled in with the latest version.
func (h *Handler) HandleConsolePublishForm(c echo.Context) error {
	cur, err := h.definitions.Get(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"), 0)
	if err != nil {
		return NotFound(err, consent.ErrDefinitionNotFound)
	}
	v := cur.Version
	var cats []string
	for _, c := range v.DataCategories {
		cats = append(cats, c.EN+" | "+c.NB)
	}
	return h.Render(c, http.StatusOK, pages.DefinitionForm(h.definitionForm(c, cur.Definition.ID, false, pages.DefinitionFormPage{
		Tag: v.Tag, TitleEN: v.Title.EN, TitleNB: v.Title.NB, PurposeEN: v.Purpose.EN, PurposeNB: v.Purpose.NB,
		Categories: strings.Join(cats, "\n"), Recipient: v.Recipient, Validity: v.Validity.String(), Retention: v.Retention.String(), Level: string(v.AssuranceLevel),
		WithdrawalEN: v.WithdrawalConsequences.EN, WithdrawalNB: v.WithdrawalConsequences.NB})))
}

// definitionForm completes the form's view model for definition id.
func (h *Handler) definitionForm(c echo.Context, id string, isNew bool, p pages.DefinitionFormPage) pages.DefinitionFormPage {
	p.New, p.ID = isNew, id
	if isNew {
		p.Frame, p.Action, p.BackURL = h.Frame(c, "definitions", "New definition"), "/console/definitions", "/console/definitions"
	} else {
		p.Frame, p.Action, p.BackURL = h.Frame(c, "definitions", "Publish "+id), definitionConsolePath(id)+"/publish", definitionConsolePath(id)
	}
	return p
}

// draftError places an error of the consent module's field on the form:
// under the form's name for the field, and for a data category, with the
// category's place in the list and its language.
func draftError(field, msg string) (name, message string) {
	var i int
	var lang string
	if n, _ := fmt.Sscanf(field, "dataCategories[%d].%s", &i, &lang); n == 2 {
		language := map[string]string{"en": "English", "nb": "Norwegian"}[lang]
		return "categories", fmt.Sprintf("Category %d, %s: %s.", i+1, language, strings.TrimSuffix(msg, "."))
	}
	switch field {
	case "dataCategories":
		return "categories", httpkit.Sentence(msg)
	case "versionTag":
		return "tag", httpkit.Sentence(msg)
	case "assuranceLevel":
		return "level", httpkit.Sentence(msg)
	}
	return strings.ReplaceAll(field, ".", "_"), httpkit.Sentence(msg)
}

// HandleConsoleSaveDefinition handles "POST /console/definitions" (a new
// definition) and "POST /console/definitions/:id/publish" (admins): Preview
// shows the consent page in both languages and stores nothing; Publish
// publishes, with its audit entry in the same transaction.
func (h *Handler) HandleConsoleSaveDefinition(c echo.Context) error {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	isNew := c.Param("id") == ""
	id := c.Param("id")
	if isNew {
		id = strings.TrimSpace(f.Value("id"))
	}
	form := pages.DefinitionFormPage{Tag: f.Value("tag"), TitleEN: f.Value("title_en"), TitleNB: f.Value("title_nb"),
		PurposeEN: f.Value("purpose_en"), PurposeNB: f.Value("purpose_nb"), Categories: f.Value("categories"),
		Recipient: f.Value("recipient"), Validity: f.Value("validity"), Retention: f.Value("retention"), Level: f.Value("level"),
		WithdrawalEN: f.Value("withdrawalConsequences_en"), WithdrawalNB: f.Value("withdrawalConsequences_nb")}
	draft := consent.Draft{Tag: form.Tag, Title: consent.Text{EN: form.TitleEN, NB: form.TitleNB},
		Purpose: consent.Text{EN: form.PurposeEN, NB: form.PurposeNB}, Recipient: form.Recipient, Validity: form.Validity, Retention: form.Retention,
		AssuranceLevel:         assurance.Level(form.Level),
		WithdrawalConsequences: consent.Text{EN: form.WithdrawalEN, NB: form.WithdrawalNB}}
	// unsplit lists the categories written without "|": their missing
	// Norwegian name is that error, not another.
	unsplit := map[string]bool{}
	for i, line := range f.Lines("categories", consent.MaxDataCategories) {
		en, nb, ok := strings.Cut(line, "|")
		if !ok {
			f.Fail("categories", "Category %d: write it as English | Norsk.", i+1)
			unsplit[fmt.Sprintf("dataCategories[%d].nb", i)] = true
		}
		draft.DataCategories = append(draft.DataCategories, consent.Text{EN: strings.TrimSpace(en), NB: strings.TrimSpace(nb)})
	}
	if isNew && !consent.ValidDefinitionID(id) {
		f.Fail("id", "Use 1 to 64 lowercase letters, digits and inner hyphens, such as mortgage-data-sharing.")
	}
	ctx := c.Request().Context()
	author := consent.Author{OrganizationID: StaffOf(c).OrganizationID, By: StaffActor(StaffOf(c))}
	refuse := func(err error) error {
		if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
			for _, fe := range e.Fields {
				if !unsplit[fe.Field] {
					name, msg := draftError(fe.Field, fe.Message)
					f.Fail(name, "%s", msg)
				}
			}
		} else if ok && e.Code == apperr.Conflict {
			f.Fail("form", "%s", e.Message)
		} else {
			return NotFound(err, consent.ErrDefinitionNotFound)
		}
		form.Errors = f.Errors
		return h.Render(c, http.StatusBadRequest, pages.DefinitionForm(h.definitionForm(c, id, isNew, form)))
	}
	preview, err := h.definitions.Preview(ctx, author.OrganizationID, id, draft)
	if err != nil || !f.Valid() {
		if err == nil {
			err = apperr.InvalidFields(nil)
		}
		return refuse(err)
	}
	if f.Value("action") != "publish" {
		org := h.organizationName(c, author.OrganizationID)
		for _, lang := range []i18n.Lang{i18n.English, i18n.Norwegian} {
			frame := pages.ConsentFrame{Lang: lang, T: i18n.ConsentTexts(lang)}
			form.Previews = append(form.Previews, pages.DefinitionPreview{Language: string(lang), T: frame.T,
				Text: httpkit.ConsentTextOf(preview, nil, org, frame)})
		}
		return h.Render(c, http.StatusOK, pages.DefinitionForm(h.definitionForm(c, id, isNew, form)))
	}
	var published consent.Published
	if isNew {
		published, err = h.definitions.Create(ctx, author, id, draft, Audited(h, c, identity.AuditDefinitionCreate, describePublished))
	} else {
		published, err = h.definitions.Publish(ctx, author, id, draft, Audited(h, c, identity.AuditDefinitionPublish, describePublished))
	}
	if err != nil {
		return refuse(err)
	}
	return c.Redirect(http.StatusSeeOther, definitionConsolePath(published.Definition.ID)+"?version="+strconv.Itoa(published.Version.Version))
}

func describePublished(p consent.Published) (string, string) {
	return p.Definition.ID, "version " + strconv.Itoa(p.Version.Version) + "; text SHA-256 " + hex.EncodeToString(p.Version.TextSHA256)
}

// HandleConsoleRetireConfirm handles "GET /console/definitions/:id/retire" (admins).
func (h *Handler) HandleConsoleRetireConfirm(c echo.Context) error {
	cur, err := h.definitions.Get(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"), 0)
	if err != nil {
		return NotFound(err, consent.ErrDefinitionNotFound)
	}
	self := definitionConsolePath(cur.Definition.ID)
	return h.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.Frame(c, "definitions", "Retire "+cur.Definition.ID),
		Heading: "Retire " + cur.Definition.ID + "?", Message: "New flows can no longer use it; flows that pinned it keep it. This cannot be undone.",
		Details: []pages.KV{{Label: "Latest version", Value: strconv.Itoa(cur.Version.Version)}, {Label: "Title", Value: cur.Version.Title.EN}},
		Action:  self + "/retire", Button: "Retire", Danger: true, BackURL: self}))
}

// HandleConsoleRetire handles "POST /console/definitions/:id/retire" (admins).
func (h *Handler) HandleConsoleRetire(c echo.Context) error {
	author := consent.Author{OrganizationID: StaffOf(c).OrganizationID, By: StaffActor(StaffOf(c))}
	d, err := h.definitions.Retire(c.Request().Context(), author, c.Param("id"), etag.Any,
		Audited(h, c, identity.AuditDefinitionRetire, func(d consent.Definition) (string, string) { return d.ID, "" }))
	if err != nil {
		return NotFound(err, consent.ErrDefinitionNotFound) // a Conflict (the default) shows as such
	}
	return c.Redirect(http.StatusSeeOther, definitionConsolePath(d.ID))
}
