package config

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/assurance"
)

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

const key32 = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=" // 32 bytes

func TestLoadDefaults(t *testing.T) {
	c, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x/y", "FLOWD_KEY_ENCRYPTION_KEY": key32,
		"FLOWD_SESSION_KEY": key32, "FLOWD_DATA_KEY": key32}), Need{Database: true, Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":8080" || c.BaseURL.String() != "http://localhost:8080" || c.Audience != "flowd" ||
		c.ConsentTTL != 30*24*time.Hour || c.MaintenanceInterval != time.Minute || c.ConsentAuth != "oidc" || c.NationalIDFormat != "generic" || !c.MigrateOnStart {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	if c.ConsoleSessionIdle != 30*time.Minute || c.ConsoleSessionMax != 12*time.Hour ||
		c.ConsentSessionIdle != 15*time.Minute || c.ConsentSessionMax != time.Hour {
		t.Fatalf("unexpected session lifetimes: %+v", c)
	}
	if len(c.SessionKey) != 32 {
		t.Fatalf("session key is %d bytes", len(c.SessionKey))
	}
	if c.ClientJWKSHosts != nil {
		t.Fatalf("jwks_uri hosts allowed by default: %v", c.ClientJWKSHosts)
	}
	c, err = Load(env(map[string]string{"FLOWD_CLIENT_JWKS_HOSTS": "Keys.Bank.example, keys.other.example"}), Need{})
	if err != nil || strings.Join(c.ClientJWKSHosts, " ") != "keys.bank.example keys.other.example" {
		t.Fatalf("FLOWD_CLIENT_JWKS_HOSTS: %v %v", c.ClientJWKSHosts, err)
	}
}

func TestLoadNamesTheBadSetting(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://x/y", "FLOWD_KEY_ENCRYPTION_KEY": key32,
		"FLOWD_SESSION_KEY": key32, "FLOWD_DATA_KEY": key32}
	tests := []struct {
		name, key, value string
	}{
		{"missing database", "DATABASE_URL", ""},
		{"bad bool", "FLOWD_TEST_EID", "maybe"},
		{"bad duration", "FLOWD_CONSENT_TTL", "soon"},
		{"zero maintenance interval", "FLOWD_MAINTENANCE_INTERVAL", "0s"},
		{"negative expiring notice", "FLOWD_CONSENT_EXPIRING_NOTICE", "-1h"},
		{"consent tokens longer than access tokens", "FLOWD_CONSENT_TOKEN_TTL", "6m"},
		{"consent tokens shorter than a second", "FLOWD_CONSENT_TOKEN_TTL", "500ms"},
		{"bad choice", "FLOWD_NATIONAL_ID_FORMAT", "us"},
		{"an unknown time zone", "FLOWD_PERSON_TIME_ZONE", "Europe/Atlantis"},
		{"the server's own time zone", "FLOWD_PERSON_TIME_ZONE", "Local"},
		{"bad base url", "FLOWD_BASE_URL", "localhost"},
		{"short key", "FLOWD_SESSION_KEY", "c2hvcnQ="},
		{"missing key", "FLOWD_KEY_ENCRYPTION_KEY", ""},
		{"bad number", "FLOWD_DB_MAX_CONNS", "-1"},
		{"bad read round trips", "FLOWD_DB_READ_ROUND_TRIPS", "many"},
		{"bad session lifetime", "FLOWD_CONSOLE_SESSION_IDLE", "-5m"},
		{"a password hash below OWASP's least", "FLOWD_PASSWORD_HASH", "m=64,t=1,p=1"},
		{"a password hash not in PHC form", "FLOWD_PASSWORD_HASH", "strong"},
		{"bad retry schedule", "FLOWD_WEBHOOK_RETRY_SCHEDULE", "5s,soon"},
		{"zero retry wait", "FLOWD_WEBHOOK_RETRY_SCHEDULE", "0s"},
		{"zero disable window", "FLOWD_WEBHOOK_DISABLE_AFTER", "0s"},
		{"zero host concurrency", "FLOWD_WEBHOOK_HOST_CONCURRENCY", "0"},
		{"negative shutdown delay", "FLOWD_SHUTDOWN_DELAY", "-1s"},
		{"bad shutdown delay", "FLOWD_SHUTDOWN_DELAY", "later"},
		{"zero shutdown timeout", "FLOWD_SHUTDOWN_TIMEOUT", "0s"},
		{"a URL for a jwks_uri host", "FLOWD_CLIENT_JWKS_HOSTS", "keys.bank.example,https://other.example"},
		{"a host name for a trusted proxy", "FLOWD_TRUSTED_PROXIES", "10.0.0.1,lb.internal"},
		{"a bad trusted range", "FLOWD_TRUSTED_PROXIES", "10.0.0.0/33"},
		{"a negative rate limit", "FLOWD_API_RATE_LIMIT", "-1"},
		{"a rate limit beyond reason", "FLOWD_API_RATE_LIMIT", "1000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			m[tt.key] = tt.value
			_, err := Load(env(m), Need{Database: true, Secrets: true})
			if err == nil {
				t.Fatalf("%s=%q accepted", tt.key, tt.value)
			}
			if !strings.Contains(err.Error(), tt.key) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q does not name %s on one line", err, tt.key)
			}
		})
	}
}

func TestLoadWithoutSecretsForMigrate(t *testing.T) {
	if _, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x/y"}), Need{Database: true}); err != nil {
		t.Fatal(err)
	}
}

func TestTrustedProxies(t *testing.T) {
	c, err := Load(env(map[string]string{}), Need{})
	if err != nil || c.TrustedProxies != nil {
		t.Fatalf("proxies trusted by default: %v %v", c.TrustedProxies, err)
	}
	c, err = Load(env(map[string]string{"FLOWD_TRUSTED_PROXIES": "10.1.2.3, 192.168.7.9/16,2001:db8::/32 ::ffff:172.16.0.1"}), Need{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.TrustedProxies {
		got = append(got, p.String())
	}
	if want := "10.1.2.3/32 192.168.0.0/16 2001:db8::/32 172.16.0.1/32"; strings.Join(got, " ") != want {
		t.Fatalf("FLOWD_TRUSTED_PROXIES gave %v, want %s", got, want)
	}
}

func TestShutdownDelay(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 5 * time.Second},
		{"0", 0},
		{"0s", 0},
		{"1500ms", 1500 * time.Millisecond},
		{"30s", 30 * time.Second},
	}
	for _, tt := range tests {
		c, err := Load(env(map[string]string{"FLOWD_SHUTDOWN_DELAY": tt.value}), Need{})
		if err != nil || c.ShutdownDelay != tt.want {
			t.Errorf("FLOWD_SHUTDOWN_DELAY=%q gave %v, %v; want %v", tt.value, c.ShutdownDelay, err, tt.want)
		}
	}
}

func TestAPIRateLimit(t *testing.T) {
	for value, want := range map[string]int{"": 600, "0": 0, "1200": 1200} {
		c, err := Load(env(map[string]string{"FLOWD_API_RATE_LIMIT": value}), Need{})
		if err != nil {
			t.Errorf("FLOWD_API_RATE_LIMIT=%q: %v", value, err)
		} else if c.APIRateLimit != want {
			t.Errorf("FLOWD_API_RATE_LIMIT=%q gave %d; want %d", value, c.APIRateLimit, want)
		}
	}
}

// TestConsentTokenTTL: 120 seconds unless set.
func TestConsentTokenTTL(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 120 * time.Second, "30s": 30 * time.Second, "5m": 5 * time.Minute} {
		c, err := Load(env(map[string]string{"FLOWD_CONSENT_TOKEN_TTL": value}), Need{})
		if err != nil || c.ConsentTokenTTL != want {
			t.Errorf("FLOWD_CONSENT_TOKEN_TTL=%q gave %v, %v; want %v", value, c.ConsentTokenTTL, err, want)
		}
	}
}

// TestConsentExpiringNotice: 30 days unless set; 0 turns it off.
func TestConsentExpiringNotice(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 30 * 24 * time.Hour, "0": 0, "7d": 7 * 24 * time.Hour, "90m": 90 * time.Minute} {
		c, err := Load(env(map[string]string{"FLOWD_CONSENT_EXPIRING_NOTICE": value}), Need{})
		if err != nil || c.ConsentExpiringNotice != want {
			t.Errorf("FLOWD_CONSENT_EXPIRING_NOTICE=%q gave %v, %v; want %v", value, c.ConsentExpiringNotice, err, want)
		}
	}
}

func TestDaysDuration(t *testing.T) {
	c, err := Load(env(map[string]string{"FLOWD_CONSENT_TTL": "7d"}), Need{})
	if err != nil || c.ConsentTTL != 7*24*time.Hour {
		t.Fatalf("7d gave %v, %v", c.ConsentTTL, err)
	}
}

func TestWebhookRetrySchedule(t *testing.T) {
	c, err := Load(env(map[string]string{"FLOWD_WEBHOOK_RETRY_SCHEDULE": "100ms, 5s,1d"}), Need{})
	if err != nil || len(c.WebhookRetrySchedule) != 3 || c.WebhookRetrySchedule[0] != 100*time.Millisecond ||
		c.WebhookRetrySchedule[2] != 24*time.Hour {
		t.Fatalf("schedule %v, %v", c.WebhookRetrySchedule, err)
	}
	if c, _ := Load(env(nil), Need{}); c.WebhookRetrySchedule != nil {
		t.Fatalf("default schedule %v, want the module's (nil)", c.WebhookRetrySchedule)
	}
}

func TestWebhookDisableAfter(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 5 * 24 * time.Hour, "2s": 2 * time.Second, "3d": 3 * 24 * time.Hour} {
		c, err := Load(env(map[string]string{"FLOWD_WEBHOOK_DISABLE_AFTER": value}), Need{})
		if err != nil {
			t.Fatalf("FLOWD_WEBHOOK_DISABLE_AFTER=%q: %v", value, err)
		}
		if c.WebhookDisableAfter != want {
			t.Errorf("FLOWD_WEBHOOK_DISABLE_AFTER=%q gave %v, want %v", value, c.WebhookDisableAfter, want)
		}
	}
}

func TestConsentACRMap(t *testing.T) {
	idporten := assurance.ACRMap{assurance.Substantial: "idporten-loa-substantial", assurance.High: "idporten-loa-high"}
	tests := []struct {
		name  string
		value string
		want  assurance.ACRMap // nil: refused
		error string           // what the refusal says besides the variable's name
	}{
		{"unset: the eIDAS URIs", "", assurance.DefaultACRMap, ""},
		{"ID-porten", "substantial=idporten-loa-substantial,high=idporten-loa-high", idporten, ""},
		{"spaces around pairs", " substantial = idporten-loa-substantial , high=idporten-loa-high ", idporten, ""},
		{"unknown level", "substantial=a,extreme=b", nil, `unknown assurance level "extreme"`},
		{"level twice", "high=a,high=b", nil, `"high" is mapped twice`},
		{"acr twice", "substantial=a,high=a", nil, `acr "a" is mapped to two levels`},
		{"empty pair", "substantial=a,,high=b", nil, "is not level=acr"},
		{"trailing comma", "high=b,", nil, "is not level=acr"},
		{"no acr", "high=", nil, "is not level=acr"},
		{"no level", "=idporten-loa-high", nil, "unknown assurance level"},
		{"no equals sign", "high", nil, "is not level=acr"},
		// acr_values separates values by spaces: such an acr could never be asked for.
		{"acr with a space", "high=loa high", nil, "space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(map[string]string{"FLOWD_CONSENT_ACR_MAP": tt.value}), Need{})
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), "FLOWD_CONSENT_ACR_MAP") || !strings.Contains(err.Error(), tt.error) ||
					strings.Contains(err.Error(), "\n") {
					t.Fatalf("FLOWD_CONSENT_ACR_MAP=%q: error %v, want one line naming the variable and saying %s", tt.value, err, tt.error)
				}
				return
			}
			if err != nil || !maps.Equal(c.ConsentACRMap, tt.want) {
				t.Fatalf("FLOWD_CONSENT_ACR_MAP=%q gave %v, %v; want %v", tt.value, c.ConsentACRMap, err, tt.want)
			}
		})
	}
}

func TestPersonTimeZone(t *testing.T) {
	for value, want := range map[string]string{"": "UTC", "Europe/Oslo": "Europe/Oslo", " Europe/Stockholm ": "Europe/Stockholm"} {
		c, err := Load(env(map[string]string{"FLOWD_PERSON_TIME_ZONE": value}), Need{})
		if err != nil || c.PersonTimeZone.String() != want {
			t.Errorf("FLOWD_PERSON_TIME_ZONE=%q gave %v, %v; want %s", value, c.PersonTimeZone, err, want)
		}
	}
}
