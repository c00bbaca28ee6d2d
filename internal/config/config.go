// Package config reads flowd's settings from the environment. Every setting
// has one name (DATABASE_URL or FLOWD_*); a bad or missing one stops start-up
// with a single line naming it.
package config

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	// The zone database is built in, so that FLOWD_PERSON_TIME_ZONE works
	// on an image without one.
	_ "time/tzdata"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/secrethash"
)

// Config holds every setting of flowd.
type Config struct {
	DatabaseURL string
	DBMaxConns  int32
	// DBReadRoundTrips bounds the shared read round trips in flight
	// (FLOWD_DB_READ_ROUND_TRIPS; 0: one per CPU, at least 2).
	DBReadRoundTrips int
	Addr             string
	BaseURL          *url.URL
	LogLevel         string
	MigrateOnStart   bool
	// Citus makes migrate, and serve when it migrates, distribute the
	// tenant tables on a Citus coordinator (FLOWD_CITUS; docs/citus.md).
	Citus bool
	// ShutdownDelay is how long serve, once told to stop, keeps serving
	// while /readyz answers 503, so that load balancers stop sending it
	// requests before it closes its listener (FLOWD_SHUTDOWN_DELAY; 0: none).
	ShutdownDelay time.Duration
	// ShutdownTimeout is how long in-flight requests then have to finish.
	ShutdownTimeout time.Duration
	// PprofAddr, when set, serves net/http/pprof on its own listener
	// (FLOWD_PPROF_ADDR, off by default; bind it to loopback).
	PprofAddr string
	// OpsAddr, when set, is a listener of its own for operators: metrics,
	// health, readiness and the profiler (FLOWD_OPS_ADDR, off by default).
	// /metrics then leaves the public address.
	OpsAddr string
	// TrustedProxies are the proxies whose X-Forwarded-For is believed
	// (FLOWD_TRUSTED_PROXIES: addresses or CIDR ranges); none by default,
	// loopback and private ranges included.
	TrustedProxies []netip.Prefix

	// KeyEncryptionKey encrypts the token-signing keys kept in the database.
	KeyEncryptionKey []byte
	// SessionKey signs and encrypts console and consent session cookies.
	SessionKey []byte
	// DataKey encrypts personal data (national ids) at rest.
	DataKey []byte
	// DataKeyPrevious lists retired data keys (FLOWD_DATA_KEY_PREVIOUS) that
	// still open values sealed before a rotation, until `flowd keys
	// rotate-data-key` has re-sealed them under DataKey.
	DataKeyPrevious [][]byte

	Audience          string
	OIDCIssuer        string
	OIDCAudience      []string
	OrgClaim          string
	TestEID           bool
	NationalIDFormat  string
	AllowInsecureURLs bool
	// ClientJWKSHosts are the hosts an API client's jwks_uri may point to
	// (FLOWD_CLIENT_JWKS_HOSTS, comma-separated); empty allows no jwks_uri,
	// so that registering a client cannot make flowd fetch from anywhere.
	ClientJWKSHosts []string
	// DPoPNonce is "required" or "off" (FLOWD_DPOP_NONCE): whether DPoP
	// proofs must carry a server nonce (RFC 9449 8 and 9). Off by default:
	// the proof's one-minute iat window and single use across instances
	// already bound a copied or pre-made proof more tightly than a nonce
	// valid for five to ten minutes would, while requiring one costs every
	// client an extra round trip at its first request and at each rotation.
	DPoPNonce string
	// APIRateLimit is how many API requests a minute a client without a
	// limit of its own may make, counted across instances
	// (FLOWD_API_RATE_LIMIT); 0 is no limit.
	APIRateLimit int

	ConsentTTL time.Duration
	// MaintenanceInterval is how often each instance cancels the flows whose
	// consent link expired and purges expired idempotency keys
	// (FLOWD_MAINTENANCE_INTERVAL); tests shorten it.
	MaintenanceInterval time.Duration
	// ConsentExpiringNotice is how long before an acceptance's validUntil
	// flow.expiring goes out (FLOWD_CONSENT_EXPIRING_NOTICE); 0 sends none.
	ConsentExpiringNotice time.Duration
	ConsentAuth           string // "oidc" or "none"
	// ConsentTokenTTL is how long a consent token lives at most
	// (FLOWD_CONSENT_TOKEN_TTL): never past the consent's validity, and
	// never past an access token's five minutes, for which a rotated key
	// stays published.
	ConsentTokenTTL time.Duration
	// Consent relying party; empty issuer means the built-in provider.
	ConsentOIDCIssuer       string
	ConsentOIDCClientID     string
	ConsentOIDCClientSecret string
	ConsentOIDCScopes       []string
	ConsentNationalIDClaim  string
	ConsentACRMap           assurance.ACRMap
	// ReceiptKeyRetention is how long a retired receipt signing key stays
	// in the JWKS, so that the receipts it signed can still be checked.
	ReceiptKeyRetention time.Duration
	// EventRetention is how long events stay in the events API.
	EventRetention time.Duration
	// PersonTimeZone is the time zone the person's pages write dates in
	// and count days in (FLOWD_PERSON_TIME_ZONE).
	PersonTimeZone *time.Location

	// Console relying party; empty issuer means the built-in provider.
	ConsoleOIDCIssuer       string
	ConsoleOIDCClientID     string
	ConsoleOIDCClientSecret string
	ConsoleOIDCScopes       []string
	ConsoleOrgClaim         string
	ConsoleRolesClaim       string

	// PasswordHash is the argon2id cost of new staff passwords
	// (FLOWD_PASSWORD_HASH, "m=65536,t=3,p=2" by default), never below
	// OWASP's least; stored hashes keep the cost they were made with.
	PasswordHash secrethash.Params

	// Session lifetimes: idle ends an unused session, max any session.
	ConsoleSessionIdle time.Duration
	ConsoleSessionMax  time.Duration
	ConsentSessionIdle time.Duration
	ConsentSessionMax  time.Duration

	WebhookAllowPrivate bool
	WebhookTimeout      time.Duration
	// WebhookRetrySchedule is the wait before each retry of a failed delivery
	// (FLOWD_WEBHOOK_RETRY_SCHEDULE); empty means the webhooks module's
	// default of at least 24 hours. Tests shorten it.
	WebhookRetrySchedule []time.Duration
	// WebhookDisableAfter is how long an endpoint's deliveries may fail
	// without a success before flowd disables it.
	WebhookDisableAfter time.Duration
	// WebhookHostConcurrency is how many deliveries an instance sends to one
	// host at once; 0 means the webhooks module's default.
	WebhookHostConcurrency int
}

// DefaultAPIRateLimit is FLOWD_API_RATE_LIMIT's default: ten requests a
// second on average, the whole minute's worth at once when a client needs it.
const DefaultAPIRateLimit = 600

// Getenv looks up one environment variable, as os.Getenv does.
type Getenv func(string) string

// Load reads the settings. need lists what the calling command requires:
// serve needs the secrets, migrate only the database.
func Load(getenv Getenv, need Need) (*Config, error) {
	r := reader{getenv: getenv}
	c := &Config{
		DatabaseURL:      r.str("DATABASE_URL", ""),
		DBMaxConns:       int32(r.integer("FLOWD_DB_MAX_CONNS", 0, 0, 1000)),
		DBReadRoundTrips: r.integer("FLOWD_DB_READ_ROUND_TRIPS", 0, 0, 1000),
		Addr:             r.str("FLOWD_ADDR", ":8080"),
		BaseURL:          r.baseURL("FLOWD_BASE_URL", "http://localhost:8080"),
		LogLevel:         r.oneOf("FLOWD_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		MigrateOnStart:   r.boolean("FLOWD_MIGRATE_ON_START", true),
		Citus:            r.boolean("FLOWD_CITUS", false),
		ShutdownDelay:    r.durationOrZero("FLOWD_SHUTDOWN_DELAY", 5*time.Second),
		ShutdownTimeout:  r.duration("FLOWD_SHUTDOWN_TIMEOUT", 20*time.Second),
		PprofAddr:        r.str("FLOWD_PPROF_ADDR", ""),
		OpsAddr:          r.str("FLOWD_OPS_ADDR", ""),
		TrustedProxies:   r.prefixes("FLOWD_TRUSTED_PROXIES"),

		Audience:          r.str("FLOWD_AUDIENCE", "flowd"),
		OIDCIssuer:        r.str("FLOWD_OIDC_ISSUER", ""),
		OIDCAudience:      r.list("FLOWD_OIDC_AUDIENCE"),
		OrgClaim:          r.str("FLOWD_ORG_CLAIM", "org_id"),
		TestEID:           r.boolean("FLOWD_TEST_EID", false),
		NationalIDFormat:  r.oneOf("FLOWD_NATIONAL_ID_FORMAT", nationalid.FormatGeneric, nationalid.Formats...),
		AllowInsecureURLs: r.boolean("FLOWD_ALLOW_INSECURE_URLS", false),
		ClientJWKSHosts:   r.hosts("FLOWD_CLIENT_JWKS_HOSTS"),
		DPoPNonce:         r.oneOf("FLOWD_DPOP_NONCE", "off", "off", "required"),
		APIRateLimit:      r.integer("FLOWD_API_RATE_LIMIT", DefaultAPIRateLimit, 0, 1_000_000_000),

		ConsentTTL:              r.duration("FLOWD_CONSENT_TTL", 30*24*time.Hour),
		MaintenanceInterval:     r.duration("FLOWD_MAINTENANCE_INTERVAL", time.Minute),
		ConsentExpiringNotice:   r.durationOrZero("FLOWD_CONSENT_EXPIRING_NOTICE", 30*24*time.Hour),
		ConsentAuth:             r.oneOf("FLOWD_CONSENT_AUTH", "oidc", "oidc", "none"),
		ConsentTokenTTL:         r.durationUpTo("FLOWD_CONSENT_TOKEN_TTL", 120*time.Second, MaxConsentTokenTTL),
		ConsentOIDCIssuer:       r.str("FLOWD_CONSENT_OIDC_ISSUER", ""),
		ConsentOIDCClientID:     r.str("FLOWD_CONSENT_OIDC_CLIENT_ID", ""),
		ConsentOIDCClientSecret: r.str("FLOWD_CONSENT_OIDC_CLIENT_SECRET", ""),
		ConsentOIDCScopes:       r.listOr("FLOWD_CONSENT_OIDC_SCOPES", []string{"openid"}),
		ConsentNationalIDClaim:  r.str("FLOWD_CONSENT_NATIONAL_ID_CLAIM", "pid"),
		ConsentACRMap:           r.acrMap("FLOWD_CONSENT_ACR_MAP"),
		ReceiptKeyRetention:     r.duration("FLOWD_RECEIPT_KEY_RETENTION", 10*365*24*time.Hour),
		EventRetention:          r.duration("FLOWD_EVENT_RETENTION", 30*24*time.Hour),
		PersonTimeZone:          r.location("FLOWD_PERSON_TIME_ZONE", time.UTC),

		ConsoleOIDCIssuer:       r.str("FLOWD_CONSOLE_OIDC_ISSUER", ""),
		ConsoleOIDCClientID:     r.str("FLOWD_CONSOLE_OIDC_CLIENT_ID", ""),
		ConsoleOIDCClientSecret: r.str("FLOWD_CONSOLE_OIDC_CLIENT_SECRET", ""),
		ConsoleOIDCScopes:       r.listOr("FLOWD_CONSOLE_OIDC_SCOPES", []string{"openid", "profile"}),
		ConsoleOrgClaim:         r.str("FLOWD_CONSOLE_ORG_CLAIM", "org_id"),
		ConsoleRolesClaim:       r.str("FLOWD_CONSOLE_ROLES_CLAIM", "roles"),
		PasswordHash:            r.hashParams("FLOWD_PASSWORD_HASH", secrethash.Default),
		ConsoleSessionIdle:      r.duration("FLOWD_CONSOLE_SESSION_IDLE", 30*time.Minute),
		ConsoleSessionMax:       r.duration("FLOWD_CONSOLE_SESSION_MAX", 12*time.Hour),
		ConsentSessionIdle:      r.duration("FLOWD_CONSENT_SESSION_IDLE", 15*time.Minute),
		ConsentSessionMax:       r.duration("FLOWD_CONSENT_SESSION_MAX", time.Hour),

		WebhookAllowPrivate:    r.boolean("FLOWD_WEBHOOK_ALLOW_PRIVATE", false),
		WebhookTimeout:         r.duration("FLOWD_WEBHOOK_TIMEOUT", 10*time.Second),
		WebhookRetrySchedule:   r.durations("FLOWD_WEBHOOK_RETRY_SCHEDULE"),
		WebhookDisableAfter:    r.duration("FLOWD_WEBHOOK_DISABLE_AFTER", 5*24*time.Hour),
		WebhookHostConcurrency: r.integer("FLOWD_WEBHOOK_HOST_CONCURRENCY", 0, 1, 1000),
	}
	if need.Database && c.DatabaseURL == "" {
		r.fail("DATABASE_URL", "is required (a PostgreSQL URL such as postgres://user@host:5432/flowd)")
	}
	if need.Secrets {
		c.KeyEncryptionKey = r.key("FLOWD_KEY_ENCRYPTION_KEY")
		c.SessionKey = r.key("FLOWD_SESSION_KEY")
		c.DataKey = r.key("FLOWD_DATA_KEY")
		c.DataKeyPrevious = r.keys("FLOWD_DATA_KEY_PREVIOUS")
	} else if getenv("FLOWD_KEY_ENCRYPTION_KEY") != "" {
		// An admin command given the key uses it where it helps: a client
		// secret it makes gets its MAC at once.
		c.KeyEncryptionKey = r.key("FLOWD_KEY_ENCRYPTION_KEY")
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

// Need says which groups of settings a command requires.
type Need struct {
	Database bool
	Secrets  bool
}

// NationalIDs is the national id format FLOWD_NATIONAL_ID_FORMAT names,
// reading Swedish numbers against now (the system clock when nil); the
// generic format when the setting names none.
func (c *Config) NationalIDs(now func() time.Time) nationalid.Format {
	f, err := nationalid.New(c.NationalIDFormat, now)
	if err != nil {
		return nationalid.Format{}
	}
	return f
}

// reader collects the first problem so that start-up reports exactly one line.
type reader struct {
	getenv Getenv
	err    error
}

func (r *reader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("config: %s %s", name, fmt.Sprintf(format, args...))
	}
}

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

func (r *reader) boolean(name string, def bool) bool {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, "must be true or false, not %q", v)
	}
	return b
}

func (r *reader) integer(name string, def, min, max int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		r.fail(name, "must be a whole number from %d to %d, not %q", min, max, v)
	}
	return n
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := parseDuration(v)
	if err != nil || d <= 0 {
		r.fail(name, "must be a positive duration such as 30s, 15m, 24h or 30d, not %q", v)
	}
	return d
}

// durationUpTo reads a positive duration of at least a second and at most
// limit.
func (r *reader) durationUpTo(name string, def, limit time.Duration) time.Duration {
	d := r.duration(name, def)
	if d > 0 && (d < time.Second || d > limit) {
		r.fail(name, "must be from 1s to %s, not %q", limit, r.getenv(name))
	}
	return d
}

// MaxConsentTokenTTL bounds FLOWD_CONSENT_TOKEN_TTL: a consent token is
// signed by the access tokens' key, which stays published for their five
// minutes after a rotation.
const MaxConsentTokenTTL = 5 * time.Minute

// location reads an IANA time zone name such as Europe/Oslo.
func (r *reader) location(name string, def *time.Location) *time.Location {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	loc, err := time.LoadLocation(v)
	if err != nil || strings.EqualFold(v, "local") {
		r.fail(name, "must be a time zone name such as Europe/Oslo or UTC, not %q", v)
		return def
	}
	return loc
}

// durationOrZero reads a duration that may also be 0, which turns off what
// it times.
func (r *reader) durationOrZero(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := parseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, "must be 0 or a positive duration such as 5s, not %q", v)
	}
	return d
}

// durations reads a comma-separated list of positive durations.
func (r *reader) durations(name string) []time.Duration {
	var out []time.Duration
	for _, v := range r.list(name) {
		d, err := parseDuration(v)
		if err != nil || d <= 0 {
			r.fail(name, "must list positive durations such as 5s,5m,30m, not %q", v)
			return nil
		}
		out = append(out, d)
	}
	return out
}

// parseDuration accepts Go durations plus a "d" suffix for days.
func parseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func (r *reader) oneOf(name, def string, allowed ...string) string {
	v := r.str(name, def)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, "must be one of %s, not %q", strings.Join(allowed, ", "), v)
	return def
}

func (r *reader) acrMap(name string) assurance.ACRMap {
	m, err := assurance.ParseACRMap(r.getenv(name))
	if err != nil {
		r.fail(name, "%s", err.Error())
	}
	return m
}

func (r *reader) list(name string) []string {
	return strings.FieldsFunc(r.getenv(name), func(c rune) bool { return c == ',' || c == ' ' })
}

// hosts reads a list of bare host names: a scheme, port or path would
// never match a URL's host, so it is refused rather than silently ignored.
func (r *reader) hosts(name string) []string {
	var out []string
	for _, h := range r.list(name) {
		if strings.ContainsAny(h, ":/@?#") || strings.Trim(h, ".") == "" {
			r.fail(name, "must list host names such as keys.bank.example, not %q", h)
			continue
		}
		out = append(out, strings.ToLower(h))
	}
	return out
}

// prefixes reads a list of IP addresses and CIDR ranges; an address is a
// range of one.
func (r *reader) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range r.list(name) {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil || a.Zone() != "" {
				r.fail(name, "must list IP addresses or CIDR ranges such as 10.0.0.0/8, not %q", v)
				continue
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out
}

func (r *reader) listOr(name string, def []string) []string {
	if l := r.list(name); len(l) > 0 {
		return l
	}
	return def
}

func (r *reader) hashParams(name string, def secrethash.Params) secrethash.Params {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	p, err := secrethash.ParseParams(v)
	if err != nil {
		r.fail(name, "%v", err)
		return def
	}
	return p
}

func (r *reader) baseURL(name, def string) *url.URL {
	v := strings.TrimRight(r.str(name, def), "/")
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		r.fail(name, "must be an absolute http(s) URL without query, not %q", v)
		u, _ = url.Parse(def)
	}
	return u
}

// keys reads an optional list of 32-byte secrets, base64 encoded, separated
// by commas or spaces.
func (r *reader) keys(name string) [][]byte {
	var ks [][]byte
	for _, v := range r.list(name) {
		k := r.decodeKey(name, v)
		if k == nil {
			return nil
		}
		ks = append(ks, k)
	}
	return ks
}

// key reads a required 32-byte secret, base64 encoded (standard or URL alphabet).
func (r *reader) key(name string) []byte {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		r.fail(name, "is required: 32 random bytes, base64 encoded (make run generates one; or: openssl rand -base64 32)")
		return nil
	}
	return r.decodeKey(name, v)
}

// decodeKey decodes one 32-byte secret, base64 encoded (standard or URL alphabet).
func (r *reader) decodeKey(name, v string) []byte {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			if len(b) != 32 {
				r.fail(name, "must decode to 32 bytes, not %d", len(b))
			}
			return b
		}
	}
	r.fail(name, "must be base64 encoded")
	return nil
}

// Secure reports whether cookies must carry the Secure flag.
func (c *Config) Secure() bool { return c.BaseURL.Scheme == "https" }

// URL joins path to the base URL.
func (c *Config) URL(path string) string { return c.BaseURL.String() + path }
