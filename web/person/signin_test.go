package person_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/web/internal/oidclogin"
	"github.com/flowd/flowd/web/internal/webtest"
	"github.com/flowd/flowd/web/person"
)

func TestTestEIDSignIn(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.Srv.Echo().GET("/consent/test-whoami", func(c echo.Context) error {
		id, ok, err := person.IdentityOf(oidclogin.ConsentSessions(ls.Cfg, ls.Sessions, nil), c)
		if err != nil {
			return err
		}
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.JSON(http.StatusOK, id)
	})
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.URL+"/consent/auth/login?return=%2Fconsent%2Ftest-whoami", nil)
	if form.Status != 200 || !strings.Contains(form.Body, "TEST identity provider") || !strings.Contains(form.Body, `name="national_id"`) {
		t.Fatalf("test eID page: %d %s", form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("national_id", "12 34")
	if p := b.Post(ls.URL+"/idp/login", v); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "1 to 64 letters") {
		t.Fatalf("a malformed national id: %d %s", p.Status, p.Body)
	}
	v.Set("national_id", "01017012345")
	// The tester picks the level, substantial unless asked for another; a
	// level the test eID does not offer is refused and issues nothing.
	if !regexp.MustCompile(`value="substantial" checked`).MatchString(form.Body) || !strings.Contains(form.Body, `value="high"`) {
		t.Fatalf("the test eID's levels: %s", form.Body)
	}
	v.Set("level", "extreme")
	if p := b.Post(ls.URL+"/idp/login", v); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Pick one of the levels offered.") {
		t.Fatalf("an unknown level: %d %s", p.Status, p.Body)
	}
	v.Set("level", "high")
	p := b.Follow(http.MethodPost, ls.URL+"/idp/login", v)
	var id person.ConsentIdentity
	if err := json.Unmarshal([]byte(p.Body), &id); err != nil || id.NationalID != "01017012345" || !id.TestIdentity ||
		id.CSRF == "" || strings.Contains(id.Subject, "01017012345") || id.ACR != assurance.DefaultACRMap[assurance.High] {
		t.Fatalf("consent identity: %s (%v)", p.Body, err)
	}
	// An open redirect is not possible through return.
	p = b.Get(ls.URL + "/consent/auth/login?return=https%3A%2F%2Fevil.example%2F")
	if p.Status != http.StatusSeeOther {
		t.Fatalf("login with a foreign return: %d", p.Status)
	}
}

// TestConsentSignInAsksForThePageLanguage: the consent sign-in tells the
// eID the language of the consent pages in ui_locales, chosen as the pages
// choose it (the switch's cookie, else Accept-Language), and the built-in
// test eID then speaks it.
func TestConsentSignInAsksForThePageLanguage(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	tests := []struct {
		name           string
		acceptLanguage string
		cookie         string // flowd_lang, the consent pages' switch
		start          string // where the person starts the sign-in
		want           string // ui_locales
		lang           string // of the test eID page
	}{
		{"Norwegian browser", "nb-NO,nb;q=0.9,en;q=0.5", "", "/consent/some-token/login", "nb en", "nb"},
		{"Nynorsk browser", "nn-NO", "", "/consent/some-token/login", "nb en", "nb"},
		{"English browser", "en-GB,en;q=0.9", "", "/consent/some-token/login", "en", "en"},
		{"unknown language", "de-DE", "", "/consent/some-token/login", "en", "en"},
		{"switched to Norwegian", "en", "nb", "/consent/some-token/login", "nb en", "nb"},
		{"switched to English", "nb", "en", "/consent/some-token/login", "en", "en"},
		{"callback route, Norwegian", "nb", "", "/consent/auth/login?return=%2Fconsent%2Fx", "nb en", "nb"},
		{"callback route, English", "", "", "/consent/auth/login?return=%2Fconsent%2Fx", "en", "en"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := formbrowser.New(t)
			b.AcceptLanguage = tt.acceptLanguage
			if tt.cookie != "" {
				u, _ := url.Parse(ls.URL)
				b.Jar().SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: tt.cookie, Path: "/"}})
			}
			p := b.Get(ls.URL + tt.start)
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+"/oauth/authorize?") {
				t.Fatalf("not sent to the provider: %d %s", p.Status, p.Location)
			}
			if got := webtest.MustQuery(t, p.Location)["ui_locales"]; len(got) != 1 || got[0] != tt.want {
				t.Fatalf("ui_locales = %q, want %q (%s)", got, tt.want, p.Location)
			}
			// The test eID follows ui_locales, not its own guess: with the
			// cookie gone, only ui_locales can carry a switched language.
			u, _ := url.Parse(ls.URL)
			b.Jar().SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: "", Path: "/", MaxAge: -1}})
			form := b.Follow(http.MethodGet, p.Location, nil)
			if form.Status != http.StatusOK || !strings.Contains(form.Body, `<html lang="`+tt.lang+`"`) {
				t.Fatalf("test eID page, want lang %s: %d %s", tt.lang, form.Status, form.Body)
			}
		})
	}
}

func TestConsentWithAnExternalEIDAndAnotherClaimName(t *testing.T) {
	t.Parallel()
	rpListener := webtest.NewListener()
	issuer := webtest.SetupLogin(t, webtest.LoginOptions{Env: map[string]string{"FLOWD_CONSENT_NATIONAL_ID_CLAIM": "nin"},
		ExtraClients: func(string) []login.Client {
			return []login.Client{{ID: "bank-consent", Name: "a bank's consent pages", Secret: "eid secret", Method: login.MethodTestEID,
				RedirectURIs: []string{webtest.BaseOf(rpListener) + "/consent/auth/callback"}}}
		}})
	ls := webtest.SetupLogin(t, webtest.LoginOptions{Preset: rpListener, Env: map[string]string{
		"FLOWD_CONSENT_OIDC_ISSUER": issuer.URL, "FLOWD_CONSENT_OIDC_CLIENT_ID": "bank-consent",
		"FLOWD_CONSENT_OIDC_CLIENT_SECRET": "eid secret", "FLOWD_CONSENT_NATIONAL_ID_CLAIM": "nin",
		"FLOWD_TEST_EID": "false", // this server's own test eID is off; the external one is used
	}})
	ls.Srv.Echo().GET("/consent/test-whoami", func(c echo.Context) error {
		id, ok, err := person.IdentityOf(oidclogin.ConsentSessions(ls.Cfg, ls.Sessions, nil), c)
		if err != nil {
			return err
		}
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.JSON(http.StatusOK, id)
	})
	b := formbrowser.New(t)
	b.AcceptLanguage = "nb-NO,nb;q=0.9"
	start := b.Get(ls.URL + "/consent/auth/login?return=%2Fconsent%2Ftest-whoami")
	if !strings.HasPrefix(start.Location, issuer.URL+"/oauth/authorize?") || webtest.MustQuery(t, start.Location).Get("ui_locales") != "nb en" {
		t.Fatalf("the external eID is not asked for the page language: %s", start.Location)
	}
	form := b.Follow(http.MethodGet, start.Location, nil)
	if !strings.HasPrefix(form.URL, issuer.URL+"/idp/login") || !strings.Contains(form.Body, `<html lang="nb"`) {
		t.Fatalf("not sent to the external eID, or not in Norwegian: %s %s", form.URL, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("national_id", "19850101-1234")
	p := b.Follow(http.MethodPost, issuer.URL+"/idp/login", v)
	var id person.ConsentIdentity
	if err := json.Unmarshal([]byte(p.Body), &id); err != nil || id.NationalID != "19850101-1234" || id.Issuer != issuer.URL {
		t.Fatalf("consent identity through the external eID: %s (%v)", p.Body, err)
	}
}

// TestConsentSignOutEndsTheSessionOnTheServer: a copy of the consent pages'
// cookie proves no one once its person signed out, and the session's record
// names no one.
func TestConsentSignOutEndsTheSessionOnTheServer(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.Srv.Echo().GET("/consent/test-whoami", func(c echo.Context) error {
		id, ok, err := person.IdentityOf(oidclogin.ConsentSessions(ls.Cfg, ls.Sessions, nil), c)
		if err != nil {
			return err
		}
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.String(http.StatusOK, id.CSRF)
	})
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.URL+"/consent/auth/login?return=%2Fconsent%2Ftest-whoami", nil)
	v := form.HiddenFields(t)
	v.Set("national_id", "01017012345")
	v.Set("level", "substantial")
	signedIn := b.Follow(http.MethodPost, ls.URL+"/idp/login", v)
	if signedIn.Status != http.StatusOK {
		t.Fatalf("consent sign-in: %d %s", signedIn.Status, signedIn.Body)
	}
	cp := webtest.CopyCookies(t, b, ls.URL, "flowd_consent")
	if p := cp.Get(ls.URL + "/consent/test-whoami"); p.Status != http.StatusOK {
		t.Fatalf("the copy before the sign-out: %d", p.Status)
	}
	var named int
	if err := ls.Pool.QueryRow(context.Background(), `select count(*) from login_sessions
		where kind = 'consent' and (subject <> '' or issuer <> '' or address <> '' or user_agent <> '')`).Scan(&named); err != nil || named != 0 {
		t.Fatalf("%d consent sessions name someone (%v)", named, err)
	}
	if p := b.Post(ls.URL+"/consent/auth/logout", url.Values{"csrf": {signedIn.Body}}); p.Status != http.StatusSeeOther {
		t.Fatalf("consent sign-out: %d %s", p.Status, p.Body)
	}
	if p := cp.Get(ls.URL + "/consent/test-whoami"); p.Status != http.StatusUnauthorized {
		t.Fatalf("the copy after the sign-out: %d %s", p.Status, p.Body)
	}
}
