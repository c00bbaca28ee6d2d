package signing

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestSignSpecVector checks Sign against the test vector the Standard Webhooks
// specification and its reference libraries publish, and against the header
// of a rotation (two secrets) as flowd has always sent it: signatures in the
// order of the secrets, separated by one space.
func TestSignSpecVector(t *testing.T) {
	t.Parallel()
	const (
		id        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		timestamp = 1614265330
		body      = `{"test": 2432232314}`
		spec      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		previous  = "whsec_cHJldmlvdXMtc2VjcmV0LW9mLTMyLWJ5dGVzLWxvbmc="
	)
	tests := []struct {
		name    string
		secrets []string
		want    string
	}{
		{"the specification's vector", []string{spec}, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{"a rotation, current first", []string{spec, previous},
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,YmxPZ654xIvlbfcso9EKrNOhHkF0Esdmbkv827km4Ac="},
	}
	for _, tt := range tests {
		got, err := Sign(tt.secrets, id, timestamp, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s: Sign = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestSignVerifiesWithLibrary signs with two secrets and checks that the
// Standard Webhooks Go library accepts each one alone and rejects a stranger.
func TestSignVerifiesWithLibrary(t *testing.T) {
	t.Parallel()
	current, previous, stranger := NewSecret(), NewSecret(), NewSecret()
	body := []byte(`{"type":"flow.opened"}`)
	ts := time.Now().Unix()
	sig, err := Sign([]string{current, previous}, "evt-1", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(sig)); n != 2 {
		t.Fatalf("signature header %q has %d signatures, want 2", sig, n)
	}
	h := http.Header{}
	h.Set("webhook-id", "evt-1")
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	for name, secret := range map[string]string{"current": current, "previous": previous} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("%s secret: %v", name, err)
		}
	}
	wh, _ := standardwebhooks.NewWebhook(stranger)
	if err := wh.Verify(body, h); err == nil {
		t.Error("a stranger's secret verified the signature")
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, b := NewSecret(), NewSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	rest, ok := strings.CutPrefix(a, "whsec_")
	if !ok {
		t.Fatalf("secret %q lacks the whsec_ prefix", a)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) != 32 {
		t.Fatalf("secret key: %d bytes, %v; want 32", len(key), err)
	}
	for _, malformed := range []string{"whsec_%%%", "whsec_", ""} {
		if _, err := Sign([]string{malformed}, "id", 1, nil); err == nil {
			t.Errorf("Sign accepted the malformed secret %q", malformed)
		}
	}
}

func TestSealer(t *testing.T) {
	t.Parallel()
	s, err := NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	secret := NewSecret()
	sealed := s.Seal("org-1", secret)
	if got, err := s.Open("org-1", sealed); err != nil || got != secret {
		t.Errorf("open = %q, %v; want the secret", got, err)
	}
	if _, err := s.Open("org-2", sealed); err == nil {
		t.Error("a sealed secret opened for another organization")
	}
	other, _ := NewSealer([]byte("another-key-another-key-another-"))
	if _, err := other.Open("org-1", sealed); err == nil {
		t.Error("a sealed secret opened with another key")
	}
	if got, err := s.Open("org-1", secret); err != nil || got != secret {
		t.Errorf("a plain secret reads back as %q, %v", got, err)
	}
}
