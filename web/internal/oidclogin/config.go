package oidclogin

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
)

// ConsoleConfig is the console's relying party from the settings: an
// external issuer when FLOWD_CONSOLE_OIDC_ISSUER is set, otherwise the
// built-in provider at FLOWD_BASE_URL with the built-in client.
func ConsoleConfig(cfg *config.Config) Config {
	c := Config{
		Name: "console", Issuer: cfg.ConsoleOIDCIssuer, ClientID: cfg.ConsoleOIDCClientID,
		ClientSecret: cfg.ConsoleOIDCClientSecret, Scopes: cfg.ConsoleOIDCScopes,
		RedirectURL: cfg.URL("/console/auth/callback"), PostLogoutRedirectURL: cfg.URL("/console/signed-out"),
		SessionKey: cfg.SessionKey, Secure: cfg.Secure(),
	}
	if c.Issuer == "" {
		c.Issuer, c.ClientID = cfg.BaseURL.String(), login.ConsoleClientID
		c.ClientSecret = login.BuiltInClientSecret(cfg.SessionKey, login.ConsoleClientID)
	}
	return c
}

// ConsentConfig is the consent pages' relying party from the settings:
// an external eID when FLOWD_CONSENT_OIDC_ISSUER is set, otherwise the
// built-in provider's test eID.
func ConsentConfig(cfg *config.Config) Config {
	c := Config{
		Name: "consent", Issuer: cfg.ConsentOIDCIssuer, ClientID: cfg.ConsentOIDCClientID,
		ClientSecret: cfg.ConsentOIDCClientSecret, Scopes: cfg.ConsentOIDCScopes,
		RedirectURL: cfg.URL("/consent/auth/callback"), PostLogoutRedirectURL: cfg.URL("/consent/signed-out"),
		SessionKey: cfg.SessionKey, Secure: cfg.Secure(),
	}
	if c.Issuer == "" {
		c.Issuer, c.ClientID = cfg.BaseURL.String(), login.ConsentClientID
		c.ClientSecret = login.BuiltInClientSecret(cfg.SessionKey, login.ConsentClientID)
	}
	return c
}

// ConsoleSessions returns the console's session store: cookie flowd_console,
// records of kind console.
func ConsoleSessions(cfg *config.Config, records Records, now func() time.Time) *Sessions {
	return NewSessions(SessionConfig{Name: "flowd_console", Kind: staff.SessionConsole, Records: records,
		Key: cfg.SessionKey, Secure: cfg.Secure(), Now: now,
		Idle: orDefault(cfg.ConsoleSessionIdle, 30*time.Minute), Absolute: orDefault(cfg.ConsoleSessionMax, 12*time.Hour)})
}

// ProviderSessions returns the built-in provider's session store: cookie
// flowd_idp, records of kind provider. Its only staff client is the console,
// so its single sign-on lives no longer than a console session may: once a
// console session times out, signing in again takes the password.
func ProviderSessions(cfg *config.Config, records Records, now func() time.Time) *Sessions {
	return NewSessions(SessionConfig{Name: "flowd_idp", Kind: staff.SessionProvider, Records: records,
		Key: cfg.SessionKey, Secure: cfg.Secure(), Now: now,
		Idle: orDefault(cfg.ConsoleSessionIdle, 30*time.Minute), Absolute: orDefault(cfg.ConsoleSessionMax, 12*time.Hour)})
}

// ConsentSessions returns the consent pages' session store: cookie
// flowd_consent, anonymous records of kind consent.
func ConsentSessions(cfg *config.Config, records Records, now func() time.Time) *Sessions {
	return NewSessions(SessionConfig{Name: "flowd_consent", Kind: staff.SessionConsent, Records: records, Anonymous: true,
		Key: cfg.SessionKey, Secure: cfg.Secure(), Now: now,
		Idle: orDefault(cfg.ConsentSessionIdle, 15*time.Minute), Absolute: orDefault(cfg.ConsentSessionMax, time.Hour)})
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Staff is a signed-in staff member as the console knows them.
type Staff struct {
	Issuer         string
	Subject        string
	OrganizationID string
	Username       string
	Name           string
	Role           staff.Role
}

// Refusals of StaffFromClaims, each shown to the person as it reads.
var (
	ErrNoOrganization = errors.New("your account is not linked to an organization")
	ErrNoRole         = errors.New("your account has no console role (viewer or admin)")
)

// StaffFromClaims maps a verified identity to a staff member: the
// organization from orgClaim (a string), the role from rolesClaim (a string
// or a list; admin wins over viewer; other values are ignored).
func StaffFromClaims(id Identity, orgClaim, rolesClaim string) (Staff, error) {
	s := Staff{Issuer: id.Issuer, Subject: id.Subject}
	s.OrganizationID = singleString(id.Claims[orgClaim])
	if s.OrganizationID == "" {
		return s, ErrNoOrganization
	}
	var roles []string
	switch v := id.Claims[rolesClaim].(type) {
	case string:
		roles = []string{v}
	case []any:
		for _, r := range v {
			if rs, ok := r.(string); ok {
				roles = append(roles, rs)
			}
		}
	}
	switch {
	case slices.Contains(roles, string(staff.RoleAdmin)):
		s.Role = staff.RoleAdmin
	case slices.Contains(roles, string(staff.RoleViewer)):
		s.Role = staff.RoleViewer
	default:
		return s, ErrNoRole
	}
	s.Username = id.Subject
	for _, k := range []string{"preferred_username", "email"} {
		if v, ok := id.Claims[k].(string); ok && v != "" {
			s.Username = v
			break
		}
	}
	s.Name, _ = id.Claims["name"].(string)
	if s.Name == "" {
		s.Name = s.Username
	}
	return s, nil
}

// singleString reads a claim that should hold one string (or a list of exactly one).
func singleString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		if len(t) == 1 {
			s, _ := t[0].(string)
			return s
		}
	case float64:
		return fmt.Sprintf("%.0f", t)
	}
	return ""
}

// NationalIDFromClaims reads the end user's national id from claim.
func NationalIDFromClaims(id Identity, claim string) string { return singleString(id.Claims[claim]) }
