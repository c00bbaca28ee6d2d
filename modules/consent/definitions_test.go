package consent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
)

// mortgage is a complete draft.
func mortgage() consent.Draft {
	return consent.Draft{
		Tag:            "DOC-7",
		Title:          consent.Text{EN: "Share your income data", NB: "Del inntektsopplysningene dine"},
		Purpose:        consent.Text{EN: "We check your income.\n\n- Salary\n- Tax", NB: "Vi sjekker inntekten din.\n\n- Lønn\n- Skatt"},
		DataCategories: []consent.Text{{EN: "Income", NB: "Inntekt"}, {EN: "Tax returns", NB: "Skattemeldinger"}},
		Validity:       "P90D",
		AssuranceLevel: assurance.Substantial,
	}
}

func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.Invalid {
		t.Fatalf("error %v, want an Invalid apperr", err)
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	return out
}

func TestADraftNamesEveryBadField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*consent.Draft)
		want   []string
	}{
		{"empty titles", func(d *consent.Draft) { d.Title = consent.Text{} }, []string{"title.en", "title.nb"}},
		{"a missing language", func(d *consent.Draft) { d.Purpose.NB = "  " }, []string{"purpose.nb"}},
		{"a purpose over 10 000 characters", func(d *consent.Draft) { d.Purpose.EN = strings.Repeat("æ", 10001) }, []string{"purpose.en"}},
		{"a purpose of 10 000 characters", func(d *consent.Draft) { d.Purpose.EN = strings.Repeat("æ", 10000) }, nil},
		{"a line break in a title", func(d *consent.Draft) { d.Title.EN = "a\nb" }, []string{"title.en"}},
		{"a control character", func(d *consent.Draft) { d.Purpose.NB = "a\x07b" }, []string{"purpose.nb"}},
		{"a line separator", func(d *consent.Draft) { d.Purpose.EN = "a\u2028b" }, []string{"purpose.en"}},
		{"a right-to-left override in a title", func(d *consent.Draft) { d.Title.NB = "Lån\u202Eknab" }, []string{"title.nb"}},
		{"a zero-width space in the recipient", func(d *consent.Draft) { d.Recipient = "Demo\u200BBank" }, []string{"recipient"}},
		{"a soft hyphen in a purpose", func(d *consent.Draft) { d.Purpose.NB = "personopplysnings\u00ADloven" }, []string{"purpose.nb"}},
		{"an isolate in a category", func(d *consent.Draft) { d.DataCategories[0].EN = "Income\u2066" }, []string{"dataCategories[0].en"}},
		{"a category without Norwegian", func(d *consent.Draft) { d.DataCategories[1].NB = "" }, []string{"dataCategories[1].nb"}},
		{"a bad validity", func(d *consent.Draft) { d.Validity = "90 days" }, []string{"validity"}},
		{"a zero validity", func(d *consent.Draft) { d.Validity = "P0D" }, []string{"validity"}},
		{"an unknown level", func(d *consent.Draft) { d.AssuranceLevel = "very" }, []string{"assuranceLevel"}},
		{"a long tag", func(d *consent.Draft) { d.Tag = strings.Repeat("t", 65) }, []string{"versionTag"}},
		{"several at once", func(d *consent.Draft) { d.Title.NB, d.Validity = "", "PT1H" }, []string{"title.nb", "validity"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mortgage()
			tt.change(&d)
			err := d.Normalize().Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if got := fieldsOf(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("fields %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTheCanonicalTextIsRFC8785JSON(t *testing.T) {
	t.Parallel()
	v := consent.Version{DefinitionID: "loan", Version: 3, Tag: "not hashed",
		Title:          consent.Text{EN: `Say "yes" <now>`, NB: "Si ja & nå"},
		Purpose:        consent.Text{EN: "One.\n\n- two\ttabbed", NB: "Én"},
		DataCategories: []consent.Text{{EN: "Income", NB: "Inntekt"}},
		Recipient:      "Alpha Bank", Validity: consent.Validity{Years: 1, Days: 2}, AssuranceLevel: assurance.High}
	// Written out by hand from RFC 8785: members sorted, no white space,
	// only '"', '\\' and control characters escaped, '<' and '&' as is.
	want := `{"assuranceLevel":"high","dataCategories":[{"en":"Income","nb":"Inntekt"}],"definition":"loan",` +
		`"purpose":{"en":"One.\n\n- two\ttabbed","nb":"Én"},"recipient":"Alpha Bank",` +
		`"title":{"en":"Say \"yes\" <now>","nb":"Si ja & nå"},"validity":"P1Y2D","version":3}`
	if got := string(v.CanonicalText()); got != want {
		t.Fatalf("canonical text\n%s\nwant\n%s", got, want)
	}
	v.Validity, v.DataCategories = consent.Validity{}, nil
	if got := string(v.CanonicalText()); !strings.Contains(got, `"dataCategories":[]`) || !strings.Contains(got, `"validity":null`) {
		t.Fatalf("no categories and no validity: %s", got)
	}
}

func TestValidity(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in    string
		until time.Time
		bad   bool
	}{
		{"P90D", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), false},
		{"P1Y", time.Date(2027, 1, 31, 12, 0, 0, 0, time.UTC), false},
		{"P2W", time.Date(2026, 2, 14, 12, 0, 0, 0, time.UTC), false},
		{"P1Y1M1W1D", time.Date(2027, 3, 11, 12, 0, 0, 0, time.UTC), false},
		{"P", time.Time{}, true},
		{"P0Y", time.Time{}, true},
		{"PT24H", time.Time{}, true},
		{"P-1D", time.Time{}, true},
		{"P101Y", time.Time{}, true},
		{"p90d", time.Time{}, true},
	}
	for _, tt := range tests {
		v, err := consent.ParseValidity(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("ParseValidity(%q) = %v, bad %v", tt.in, err, tt.bad)
			continue
		}
		if !tt.bad && (!v.After(at).Equal(tt.until) || v.String() != tt.in) {
			t.Errorf("%q: until %v (want %v), written %q", tt.in, v.After(at), tt.until, v.String())
		}
	}
}

func TestBlocks(t *testing.T) {
	t.Parallel()
	got := consent.Blocks("First line\nsame paragraph\n\n- one\n* two\n• three\nafter the list\n\n\n<b>not html</b>")
	want := []consent.TextBlock{
		{Lines: []string{"First line", "same paragraph"}},
		{List: true, Lines: []string{"one", "two", "three"}},
		{Lines: []string{"after the list"}},
		{Lines: []string{"<b>not html</b>"}},
	}
	if len(got) != len(want) {
		t.Fatalf("blocks %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].List != want[i].List || !slices.Equal(got[i].Lines, want[i].Lines) {
			t.Fatalf("block %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestEveryOrganizationGetsItsDefaultOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// Two instances make it at the same time: one insert wins, neither fails.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = consent.NewDefinitions(pool, orgs{}).List(ctx, "org-1")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	list, err := consent.NewDefinitions(pool, orgs{}).List(ctx, "org-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("definitions %+v, want the default alone", list)
	}
	d, v := list[0].Definition, list[0].Version
	if d.ID != consent.DefaultDefinitionID || !d.Default || v.Version != 1 || v.AssuranceLevel != assurance.Low ||
		v.Title.EN != "Acme Bank asks for your consent" || v.Title.NB != "Acme Bank ber om ditt samtykke" || v.Recipient != "Acme Bank" {
		t.Fatalf("default %+v %+v", d, v)
	}
	if sum := sha256.Sum256(v.CanonicalText()); !bytes.Equal(v.TextSHA256, sum[:]) {
		t.Fatal("the stored hash is not the canonical text's")
	}
}

func TestPublishingAddsAVersionAndChangesNoEarlierOne(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	defs := consent.NewDefinitions(pool, orgs{})
	author := consent.Author{OrganizationID: "org-1", By: "client-1"}
	first, err := defs.Create(ctx, author, "mortgage", mortgage())
	if err != nil {
		t.Fatal(err)
	}
	if first.Version.Version != 1 || first.Version.Recipient != "Acme Bank" || first.Version.Validity.String() != "P90D" {
		t.Fatalf("created %+v", first.Version)
	}
	if _, err := defs.Create(ctx, author, "mortgage", mortgage()); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("create of an id in use = %v, want Conflict", err)
	}
	next := mortgage()
	next.Title.EN, next.Recipient, next.Validity = "Share your income and tax data", "Alpha Bank ASA", ""
	second, err := defs.Publish(ctx, author, "mortgage", next)
	if err != nil {
		t.Fatal(err)
	}
	if second.Version.Version != 2 || second.Definition.LatestVersion != 2 || bytes.Equal(second.Version.TextSHA256, first.Version.TextSHA256) {
		t.Fatalf("published %+v", second)
	}
	again, err := defs.Get(ctx, "org-1", "mortgage", 1)
	if err != nil {
		t.Fatal(err)
	}
	if again.Version.Title != first.Version.Title || !bytes.Equal(again.Version.TextSHA256, first.Version.TextSHA256) ||
		!again.Version.PublishedAt.Equal(first.Version.PublishedAt) {
		t.Fatalf("version 1 after publishing 2: %+v, was %+v", again.Version, first.Version)
	}
	latest, err := defs.Get(ctx, "org-1", "mortgage", 0)
	if err != nil || latest.Version.Version != 2 || latest.Version.Recipient != "Alpha Bank ASA" || !latest.Version.Validity.IsZero() {
		t.Fatalf("latest = %+v, %v", latest.Version, err)
	}
	for _, n := range []int{3, -1} {
		if _, err := defs.Get(ctx, "org-1", "mortgage", n); !errors.Is(err, consent.ErrDefinitionNotFound) {
			t.Errorf("version %d = %v, want ErrDefinitionNotFound", n, err)
		}
	}
	if _, err := defs.Get(ctx, "org-2", "mortgage", 0); !errors.Is(err, consent.ErrDefinitionNotFound) {
		t.Errorf("another organization's definition = %v, want ErrDefinitionNotFound", err)
	}
	if _, err := defs.Publish(ctx, author, "mortgage", consent.Draft{}); apperr.CodeOf(err) != apperr.Invalid {
		t.Errorf("publish of an empty draft = %v, want Invalid", err)
	}
}

// pin pins a definition in a transaction of its own.
func pin(defs *consent.DefinitionStore, pool database.Beginner, org, id string, n int) (flows.PinnedDefinition, error) {
	var p flows.PinnedDefinition
	err := database.WithTx(context.Background(), pool, func(tx database.Tx) (err error) {
		p, err = defs.PinTx(context.Background(), tx, org, id, n)
		return err
	})
	return p, err
}

func TestPinningAndRetiring(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	defs := consent.NewDefinitions(pool, orgs{})
	author := consent.Author{OrganizationID: "org-1", By: "client-1"}
	if _, err := defs.Create(ctx, author, "mortgage", mortgage()); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Publish(ctx, author, "mortgage", consent.Draft{Title: consent.Text{EN: "t", NB: "t"}, Purpose: consent.Text{EN: "p", NB: "p"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id    string
		n     int
		want  flows.PinnedDefinition
		field string
	}{
		{"", 0, flows.PinnedDefinition{ID: "consent", Version: 1}, ""},
		{"mortgage", 0, flows.PinnedDefinition{ID: "mortgage", Version: 2}, ""},
		{"mortgage", 1, flows.PinnedDefinition{ID: "mortgage", Version: 1, Tag: "DOC-7"}, ""},
		{"mortgage", 3, flows.PinnedDefinition{}, "flowDefinitionVersion"},
		{"unknown", 0, flows.PinnedDefinition{}, "flowDefinitionId"},
		{"Not A Slug", 0, flows.PinnedDefinition{}, "flowDefinitionId"},
		{"new", 0, flows.PinnedDefinition{}, "flowDefinitionId"},
	}
	for _, tt := range tests {
		got, err := pin(defs, pool, "org-1", tt.id, tt.n)
		if tt.field != "" {
			if f := fieldsOf(t, err); !slices.Equal(f, []string{tt.field}) {
				t.Errorf("pin %q %d: fields %v, want %s", tt.id, tt.n, f, tt.field)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("pin %q %d = %+v, %v; want %+v", tt.id, tt.n, got, err, tt.want)
		}
	}

	if _, err := defs.Retire(ctx, author, consent.DefaultDefinitionID, etag.Any); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("retiring the default = %v, want Conflict", err)
	}
	retired, err := defs.Retire(ctx, author, "mortgage", etag.Any)
	if err != nil || !retired.Retired() {
		t.Fatalf("retire = %+v, %v", retired, err)
	}
	if again, err := defs.Retire(ctx, author, "mortgage", etag.Any); err != nil || !again.RetiredAt.Equal(*retired.RetiredAt) {
		t.Fatalf("retiring again = %+v, %v; want no change", again, err)
	}
	if _, err := pin(defs, pool, "org-1", "mortgage", 0); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("pinning a retired definition = %v, want Conflict", err)
	}
	if _, err := defs.Publish(ctx, author, "mortgage", mortgage()); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("publishing to a retired definition = %v, want Conflict", err)
	}
	if _, err := defs.Retire(ctx, author, "unknown", etag.Any); !errors.Is(err, consent.ErrDefinitionNotFound) {
		t.Fatalf("retiring an unknown definition = %v", err)
	}
}

// TestARetireWaitsForTheCreatesPinningIt: a create that pinned a definition
// commits its flow before the retire does, never after it.
func TestARetireWaitsForTheCreatesPinningIt(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	defs := consent.NewDefinitions(pool, orgs{})
	author := consent.Author{OrganizationID: "org-1", By: "client-1"}
	if _, err := defs.Create(ctx, author, "mortgage", mortgage()); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := defs.PinTx(ctx, tx, "org-1", "mortgage", 0); err != nil {
		t.Fatal(err)
	}
	retired := make(chan error, 1)
	go func() {
		_, err := defs.Retire(ctx, author, "mortgage", etag.Any)
		retired <- err
	}()
	// The retire is waiting on the pin's lock: wait until PostgreSQL says so
	// (on Citus, the worker that holds the definition).
	activity := "pg_stat_activity"
	if dbtest.Citus() {
		activity = "citus_stat_activity"
	}
	for deadline := testwait.Deadline(t); ; {
		var waiting bool
		if err := pool.QueryRow(ctx, `select exists (select from `+activity+`
			where datname = current_database() and wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retire never waited for the pin's lock")
		}
		select {
		case err := <-retired:
			t.Fatalf("the retire finished (%v) while a create held the definition", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-retired; err != nil {
		t.Fatal(err)
	}
}

func TestADecisionRecordsTheTextItWasShown(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	author := consent.Author{OrganizationID: e.caller.OrganizationID, By: "client-1"}
	v1, err := e.defs.Create(ctx, author, "mortgage", mortgage())
	if err != nil {
		t.Fatal(err)
	}
	accepted, token := e.createOn(t, "https://bank.example/done", "mortgage", 0)
	rejected, rejectToken := e.createOn(t, "https://bank.example/done", "mortgage", 0)
	// A new version changes neither what the flows pinned nor what they show.
	next := mortgage()
	next.Title.NB = "Ny tittel"
	if _, err := e.defs.Publish(ctx, author, "mortgage", next); err != nil {
		t.Fatal(err)
	}
	req, err := e.journey.Visit(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if req.Text.Version != 1 || req.Text.Title != v1.Version.Title || req.Text.Recipient != "Acme Bank" {
		t.Fatalf("the request shows %+v, want version 1", req.Text)
	}
	if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: substantial},
		consent.Answer{Accept: true, Language: "nb"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.journey.Decide(ctx, rejectToken, consent.Proof{NationalID: "12345678901", ACR: assurance.DefaultACRMap[assurance.High]},
		consent.Answer{Accept: false, Language: "fr"}); err != nil {
		t.Fatal(err)
	}
	f := e.get(t, accepted.FlowID)
	if f.FlowDefinitionID != "mortgage" || f.FlowDefinitionVersion != 1 || f.VersionTag != "DOC-7" || f.ProcessDefinitionID() != "mortgage:1" {
		t.Fatalf("pinned %s %d %q", f.FlowDefinitionID, f.FlowDefinitionVersion, f.VersionTag)
	}
	ev := f.Evidence
	if !bytes.Equal(ev.TextSHA256, v1.Version.TextSHA256) || ev.Language != "nb" || ev.AssuranceLevel != "substantial" ||
		ev.ACR != substantial || ev.ValidUntil == nil || !ev.ValidUntil.Equal(f.DecidedAt.AddDate(0, 0, 90)) {
		t.Fatalf("evidence %+v, decided %v", ev, f.DecidedAt)
	}
	r := e.get(t, rejected.FlowID).Evidence
	if r.ValidUntil != nil || r.Language != "en" || r.AssuranceLevel != "high" {
		t.Fatalf("a rejection's evidence %+v: no validity, the fallback language, the level reached", r)
	}
}

func TestTheAssuranceLevelIsEnforced(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Hour)
	ctx := context.Background()
	high := mortgage()
	high.AssuranceLevel = assurance.High
	if _, err := e.defs.Create(ctx, consent.Author{OrganizationID: e.caller.OrganizationID, By: "c"}, "high", high); err != nil {
		t.Fatal(err)
	}
	c, token := e.createOn(t, "https://bank.example/done", "high", 0)
	req, err := e.journey.Visit(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	for _, acr := range []string{substantial, "", "urn:unknown", assurance.DefaultACRMap[assurance.Low]} {
		if err := e.journey.CheckAssurance(req, acr); !errors.Is(err, consent.ErrAssuranceTooLow) {
			t.Errorf("CheckAssurance(%q) = %v, want ErrAssuranceTooLow", acr, err)
		}
		_, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: acr}, consent.Answer{Accept: true})
		var weak *consent.AssuranceError
		if !errors.As(err, &weak) || weak.Required != assurance.High || weak.ACR != assurance.DefaultACRMap[assurance.High] {
			t.Fatalf("Decide with acr %q = %v, want an AssuranceError asking for high", acr, err)
		}
	}
	if f := e.get(t, c.FlowID); f.ConsentStatus != flows.Opened || f.DecidedAt != nil {
		t.Fatalf("after refused sign-ins the flow is %s", f.ConsentStatus)
	}
	highACR := assurance.DefaultACRMap[assurance.High]
	if err := e.journey.CheckAssurance(req, highACR); err != nil {
		t.Fatal(err)
	}
	if _, err := e.journey.Decide(ctx, token, consent.Proof{NationalID: "12345678901", ACR: highACR}, consent.Answer{Accept: true}); err != nil {
		t.Fatal(err)
	}
	if f := e.get(t, c.FlowID); f.ConsentStatus != flows.Accepted || f.Evidence.AssuranceLevel != "high" {
		t.Fatalf("flow %s, level %q", f.ConsentStatus, f.Evidence.AssuranceLevel)
	}
}
