package oauth_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

func TestProviderSessionSignsInAgainWithoutTheForm(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleViewer)
	ls.CreateStaff(t, "org-a", "bob", staff.RoleViewer)
	b := formbrowser.New(t)
	if p := webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword); !strings.Contains(p.Body, ">viewer<") {
		t.Fatalf("sign-in: %s", p.Body)
	}
	// The console session alone is dropped (as when it times out): the
	// provider still knows the browser and signs it in without a form.
	for _, u := range []string{ls.URL} {
		parsed, _ := url.Parse(u)
		b.Jar().SetCookies(parsed, []*http.Cookie{{Name: "flowd_console", Value: "", MaxAge: -1, Path: "/"}})
	}
	if p := b.Follow(http.MethodGet, ls.URL+"/console", nil); !strings.Contains(p.Body, "Person ada") {
		t.Fatalf("single sign-on: %s", p.Body)
	}
	// A disabled account loses that too.
	if _, err := ls.Staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	parsed, _ := url.Parse(ls.URL)
	b.Jar().SetCookies(parsed, []*http.Cookie{{Name: "flowd_console", Value: "", MaxAge: -1, Path: "/"}})
	p := b.Follow(http.MethodGet, ls.URL+"/console", nil)
	if !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("a disabled account was signed in by its provider session: %s", p.Body)
	}
}

func TestDisabledAccountCannotSignIn(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	if _, err := ls.Staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	b := formbrowser.New(t)
	p := webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword)
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "The username or password is not right.") {
		t.Fatalf("disabled account: %d %s", p.Status, p.Body)
	}
	if p := b.Get(ls.URL + "/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("a disabled account got a session: %d", p.Status)
	}
}

func TestWrongCredentialsLookAlikeAndGuessingIsLimited(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{}) // 3 failures per account, 5 per address
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	ls.CreateStaff(t, "org-a", "cy", staff.RoleAdmin)
	b := formbrowser.New(t)

	wrongPassword := webtest.SignInStaff(t, b, ls.URL, "ada", "not the password at all")
	unknownUser := webtest.SignInStaff(t, b, ls.URL, "nobody", webtest.TestPassword)
	msgRE := regexp.MustCompile(`role="alert">([^<]*)<`)
	if wrongPassword.Status != http.StatusUnauthorized || unknownUser.Status != wrongPassword.Status ||
		msgRE.FindString(wrongPassword.Body) == "" || msgRE.FindString(wrongPassword.Body) != msgRE.FindString(unknownUser.Body) {
		t.Fatalf("wrong password and unknown user answer differently:\n%d %s\n%d %s", wrongPassword.Status,
			msgRE.FindString(wrongPassword.Body), unknownUser.Status, msgRE.FindString(unknownUser.Body))
	}
	// Two more failures for ada make three: her account pauses, even for the right password.
	for range 2 {
		if p := webtest.SignInStaff(t, b, ls.URL, "ada", "still not the password"); p.Status != http.StatusUnauthorized {
			t.Fatalf("failure: %d", p.Status)
		}
	}
	p := webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword)
	if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, "Too many failed attempts") {
		t.Fatalf("fourth attempt for a paused account: %d %q %s", p.Status, p.Header.Get("Retry-After"), p.Body)
	}
	// cy's account is fine until the address reaches five failures (four so far).
	if p := webtest.SignInStaff(t, b, ls.URL, "cy", "wrong for cy too"); p.Status != http.StatusUnauthorized {
		t.Fatalf("cy's failure: %d", p.Status)
	}
	if p := webtest.SignInStaff(t, b, ls.URL, "cy", webtest.TestPassword); p.Status != http.StatusTooManyRequests {
		t.Fatalf("the address is over its limit, yet: %d %s", p.Status, p.Body)
	}
}

// TestTestEIDSpeaksTheRequestedLanguage: the built-in provider's test eID
// form is in the first language of ui_locales that it has, else in the
// browser's Accept-Language, else English, and its error re-render after a
// POST stays in the language the form was shown in, also after the form's
// own language switch.
func TestTestEIDSpeaksTheRequestedLanguage(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	type texts struct{ lang, label, error string }
	english := texts{"en", "National identity number", "Type a national identity number"}
	norwegian := texts{"nb", "Fødselsnummer", "Skriv et fødselsnummer"}
	tests := []struct {
		name           string
		uiLocales      string
		acceptLanguage string
		want           texts
	}{
		{"ui_locales nb", "nb", "", norwegian},
		{"ui_locales nb over Accept-Language", "nb", "en-GB,en;q=0.9", norwegian},
		{"ui_locales en over Accept-Language", "en", "nb-NO,nb;q=0.9", english},
		{"first one we have", "de nn-NO en", "en", norwegian},
		{"no ui_locales: Accept-Language", "", "nb-NO,nb;q=0.9,en;q=0.5", norwegian},
		{"none we have: Accept-Language", "de fr", "no", norwegian},
		{"nothing: English", "", "", english},
		{"none we have anywhere: English", "sv", "fr-FR", english},
	}
	check := func(t *testing.T, p formbrowser.Page, want texts, status int, withError bool) {
		t.Helper()
		if p.Status != status || !strings.Contains(p.Body, `<html lang="`+want.lang+`"`) || !strings.Contains(p.Body, want.label) ||
			strings.Contains(p.Body, want.error) != withError {
			t.Fatalf("want %s (error shown: %v), got %d:\n%s", want.lang, withError, p.Status, p.Body)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := formbrowser.New(t)
			b.AcceptLanguage = tt.acceptLanguage
			_, challenge := pkcePair()
			q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {ls.URL + "/consent/auth/callback"},
				"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
			if tt.uiLocales != "" {
				q.Set("ui_locales", tt.uiLocales)
			}
			form := b.Follow(http.MethodGet, ls.URL+"/oauth/authorize?"+q.Encode(), nil)
			check(t, form, tt.want, http.StatusOK, false)

			v := form.HiddenFields(t)
			v.Set("national_id", "not a national id")
			check(t, b.Post(ls.URL+"/idp/login", v), tt.want, http.StatusBadRequest, true)
		})
	}

	t.Run("the form's switch wins and holds through the POST", func(t *testing.T) {
		t.Parallel()
		b := formbrowser.New(t)
		_, challenge := pkcePair()
		q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {ls.URL + "/consent/auth/callback"},
			"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
			"ui_locales": {"nb"}}
		form := b.Follow(http.MethodGet, ls.URL+"/oauth/authorize?"+q.Encode(), nil)
		check(t, form, norwegian, http.StatusOK, false)
		m := regexp.MustCompile(`class="lang-switch" href="([^"]+)"`).FindStringSubmatch(form.Body)
		if m == nil {
			t.Fatalf("no language switch: %s", form.Body)
		}
		switched := b.Get(ls.URL + html.UnescapeString(m[1]))
		check(t, switched, english, http.StatusOK, false)
		// The switch is remembered (the cookie) but the POST holds its
		// language by itself: with the cookie gone and a Norwegian
		// browser, the error is still in English.
		u, _ := url.Parse(ls.URL)
		b.Jar().SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: "", Path: "/", MaxAge: -1}})
		b.AcceptLanguage = "nb"
		v := switched.HiddenFields(t)
		v.Set("national_id", "")
		check(t, b.Post(ls.URL+"/idp/login", v), english, http.StatusBadRequest, true)
	})
}

func TestTestEIDOffIsRefused(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{Env: map[string]string{"FLOWD_TEST_EID": "false"}})
	b := formbrowser.New(t)
	p := b.Follow(http.MethodGet, ls.URL+"/consent/auth/login?return=%2Fconsent%2Fx", nil)
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "access_denied") {
		t.Fatalf("test eID while off: %d %s", p.Status, p.Body)
	}
	// Only the test eID issues an acr: with it off, discovery names none.
	if doc := discovery(t, ls.URL); doc["acr_values_supported"] != nil {
		t.Fatalf("acr_values_supported with the test eID off: %v", doc["acr_values_supported"])
	}
}

func TestSignInFormIsBoundToItsBrowser(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	victim, attacker := formbrowser.New(t), formbrowser.New(t)
	form := attacker.Follow(http.MethodGet, ls.URL+"/console", nil)
	v := form.HiddenFields(t)
	v.Set("username", "ada")
	v.Set("password", webtest.TestPassword)
	// Posting the attacker's form from the victim's browser (login CSRF) fails.
	if p := victim.Post(ls.URL+"/idp/login", v); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "expired") {
		t.Fatalf("a form posted from another browser: %d %s", p.Status, p.Body)
	}
	// So does a wrong CSRF token in the right browser.
	v.Set("csrf", "forged")
	if p := attacker.Post(ls.URL+"/idp/login", v); p.Status != http.StatusBadRequest {
		t.Fatalf("a forged form token: %d", p.Status)
	}
}

// discovery returns the provider metadata document served at base.
func discovery(t *testing.T, base string) map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: %d %v", resp.StatusCode, err)
	}
	return doc
}

// levelRadioRE finds the test eID's level radios and whether each is checked.
var levelRadioRE = regexp.MustCompile(`<input type="radio" name="level" value="([^"]*)"( checked)?`)

// testEIDLevels returns the levels a test eID page offers, in order, and
// the one checked.
func testEIDLevels(body string) (offered []string, checked string) {
	for _, m := range levelRadioRE.FindAllStringSubmatch(body, -1) {
		offered = append(offered, m[1])
		if m[2] != "" {
			checked = m[1]
		}
	}
	return offered, checked
}

// TestTestEIDOffersTheMapsLevels: the test eID offers the levels
// FLOWD_CONSENT_ACR_MAP maps, weakest first, and discovery lists their acr
// values; the form preselects the first acr of acr_values that the map
// knows, else substantial; a level not offered is refused and issues
// nothing; the ID token carries the chosen level's acr and the test marker.
func TestTestEIDOffersTheMapsLevels(t *testing.T) {
	t.Parallel()
	const (
		idporten = "substantial=idporten-loa-substantial,high=idporten-loa-high"
		eidas    = "http://eidas.europa.eu/LoA/"
	)
	servers := map[string]webtest.LoginServer{}
	for _, acrMap := range []string{"", idporten} {
		servers[acrMap] = webtest.SetupLogin(t, webtest.LoginOptions{Env: map[string]string{"FLOWD_CONSENT_ACR_MAP": acrMap}})
	}
	t.Run("discovery", func(t *testing.T) {
		for acrMap, want := range map[string][]any{
			"":       {eidas + "low", eidas + "substantial", eidas + "high"},
			idporten: {"idporten-loa-substantial", "idporten-loa-high"},
		} {
			if got, _ := discovery(t, servers[acrMap].URL)["acr_values_supported"].([]any); !slices.Equal(got, want) {
				t.Errorf("FLOWD_CONSENT_ACR_MAP=%q: acr_values_supported = %v, want %v", acrMap, got, want)
			}
		}
	})
	tests := []struct {
		name        string
		acrMap      string
		acrValues   string
		offered     []string
		preselected string
		pick        string
		wantACR     string // empty: the level is refused
	}{
		{"nothing asked: substantial", "", "", []string{"low", "substantial", "high"}, "substantial", "high", eidas + "high"},
		{"high asked", "", eidas + "high", []string{"low", "substantial", "high"}, "high", "low", eidas + "low"},
		{"the first acr the map knows", "", "urn:other " + eidas + "low " + eidas + "high", []string{"low", "substantial", "high"}, "low", "substantial", eidas + "substantial"},
		{"an acr the map does not know", "", "idporten-loa-high", []string{"low", "substantial", "high"}, "substantial", "substantial", eidas + "substantial"},
		{"a level that does not exist", "", "", []string{"low", "substantial", "high"}, "substantial", "extreme", ""},
		{"ID-porten: high asked", idporten, "idporten-loa-high", []string{"substantial", "high"}, "high", "high", "idporten-loa-high"},
		{"ID-porten: eIDAS asked", idporten, eidas + "high", []string{"substantial", "high"}, "substantial", "substantial", "idporten-loa-substantial"},
		{"ID-porten: low is not offered", idporten, "", []string{"substantial", "high"}, "substantial", "low", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := servers[tt.acrMap]
			b := formbrowser.New(t)
			verifier, challenge := pkcePair()
			redirect := ls.URL + "/consent/auth/callback"
			q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {redirect},
				"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
			if tt.acrValues != "" {
				q.Set("acr_values", tt.acrValues)
			}
			form := b.Follow(http.MethodGet, ls.URL+"/oauth/authorize?"+q.Encode(), nil)
			if offered, checked := testEIDLevels(form.Body); !slices.Equal(offered, tt.offered) || checked != tt.preselected {
				t.Fatalf("offered %v with %q checked, want %v with %q: %d %s", offered, checked, tt.offered, tt.preselected, form.Status, form.Body)
			}
			v := form.HiddenFields(t)
			v.Set("national_id", "01017012345")
			v.Set("level", tt.pick)
			p := b.Post(ls.URL+"/idp/login", v)
			if tt.wantACR == "" {
				if p.Status != http.StatusBadRequest || p.Location != "" || !strings.Contains(p.Body, "Pick one of the levels offered.") {
					t.Fatalf("level %q: %d %s %s", tt.pick, p.Status, p.Location, p.Body)
				}
				if offered, _ := testEIDLevels(p.Body); !slices.Equal(offered, tt.offered) {
					t.Fatalf("the form again offers %v, want %v", offered, tt.offered)
				}
				// Nothing was issued: the sign-in is still open, and completes
				// at a level offered.
				v.Set("level", tt.preselected)
				if p = b.Post(ls.URL+"/idp/login", v); p.Status != http.StatusSeeOther || webtest.MustQuery(t, p.Location).Get("code") == "" {
					t.Fatalf("after a refused level, a level offered: %d %s %s", p.Status, p.Location, p.Body)
				}
				return
			}
			code := webtest.MustQuery(t, p.Location).Get("code")
			if p.Status != http.StatusSeeOther || code == "" {
				t.Fatalf("level %q: %d %s %s", tt.pick, p.Status, p.Location, p.Body)
			}
			got := exchange(t, ls, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
				"code_verifier": {verifier}, "client_id": {login.ConsentClientID},
				"client_secret": {login.BuiltInClientSecret(ls.Cfg.SessionKey, login.ConsentClientID)}}, false)
			raw, _ := got.body["id_token"].(string)
			provider, err := oidc.NewProvider(context.Background(), ls.URL)
			if err != nil {
				t.Fatal(err)
			}
			idToken, err := provider.Verifier(&oidc.Config{ClientID: login.ConsentClientID}).Verify(context.Background(), raw)
			if err != nil {
				t.Fatalf("ID token (%d %v): %v", got.status, got.body, err)
			}
			var claims struct {
				ACR  string `json:"acr"`
				Test bool   `json:"flowd_test_identity"`
				PID  string `json:"pid"`
			}
			if err := idToken.Claims(&claims); err != nil || claims.ACR != tt.wantACR || !claims.Test || claims.PID != "01017012345" {
				t.Fatalf("ID token claims %+v (%v), want acr %s and the test marker", claims, err, tt.wantACR)
			}
		})
	}
}
