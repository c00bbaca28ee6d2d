package admin_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/cmd/flowd/internal/command"
)

// lintRecord is a valid consent record, as the API answers one.
func lintRecord() map[string]any {
	return map[string]any{
		"schema_version": "flowd-consent-record/1", "record_id": "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21",
		"receipt_ids": []any{"019ab3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"}, "pii_principal_id": "3q2-7wEAAAAK9lY1Vb2Hq0nH8pJm2cJ4uS1xQYtV3nA",
		"consent_status": "ConsentGiven",
		"notice": map[string]any{"definition_id": "income", "definition_version": 1, "title": map[string]any{"en": "Income", "nb": "Inntekt"},
			"text_sha256": strings.Repeat("ab", 32)},
		"language":        "nb",
		"pii_controllers": []any{map[string]any{"id": "org-a", "name": "Demo Bank"}},
		"purposes": []any{map[string]any{"purpose_id": "income:1", "purpose": map[string]any{"en": "Income", "nb": "Inntekt"},
			"description": map[string]any{"en": "We check it.", "nb": "Vi sjekker den."}, "lawful_basis": "dpv:Consent",
			"pii_information": []any{map[string]any{"en": "Income", "nb": "Inntekt"}},
			"recipients":      []any{map[string]any{"role": "recipient", "name": "Demo Bank"}}}},
		"collection_method": map[string]any{"method": "web_form", "identity_assurance": map[string]any{"level": "substantial"}},
		"events": []any{map[string]any{"event_time": "2026-01-02T03:04:05.678Z", "event_type": "consent_given",
			"event_state": "ConsentGiven", "event_by": "pii_principal"}},
		"withdrawal_method": map[string]any{"url": "https://flowd.example/my", "api": "POST https://flowd.example/api/flows/x/withdraw"},
	}
}

// lintReceipt is a valid consent receipt's claims, as flowd signs them.
func lintReceipt() map[string]any {
	return map[string]any{
		"iss": "https://flowd.example", "jti": "019ab3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", "iat": 1767322800,
		"flowId": "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21", "referenceId": "DEMO-1", "organizationId": "org-a",
		"organizationName": "Demo Bank", "recipient": "Demo Bank",
		"definition": map[string]any{"id": "income", "version": 1, "textSha256": strings.Repeat("ab", 32), "language": "en"},
		"decision":   "accepted", "assurance": map[string]any{"level": "high", "acr": "idporten-loa-high"},
		"subject": "3q2-7wEAAAAK9lY1Vb2Hq0nH8pJm2cJ4uS1xQYtV3nA",
	}
}

// compactJWS makes a compact JWS of claims under typ, its signature made up:
// lint does not check it.
func compactJWS(typ string, claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]any{"alg": "ES256", "kid": "receipt-1", "typ": typ}) + "." + enc(claims) + ".c2lnbmF0dXJl"
}

func with(m map[string]any, change func(map[string]any)) map[string]any {
	change(m)
	return m
}

// TestReceiptsLint checks records and receipts against the schema from the
// command line: what is valid prints one OK line and exits 0, each kind of
// violation is printed with its JSON pointer and exits 1, a command line
// or a file it cannot read exits 2.
func TestReceiptsLint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	asJSON := func(m map[string]any) string { b, _ := json.Marshal(m); return string(b) }
	for _, c := range []struct {
		name, doc string
		exit      int
		want      []string // lines or parts of lines of the output
	}{
		{"a valid record", asJSON(lintRecord()), 0, []string{"OK: ", "is a valid consent record."}},
		{"a valid erased record", asJSON(map[string]any{"schema_version": "flowd-consent-record/1", "record_id": "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21",
			"receipt_ids": []any{}, "pii_principal_id": nil, "consent_status": "ConsentUnknown",
			"pii_controllers": []any{map[string]any{"id": "org-a", "name": "Demo Bank"}},
			"events":          []any{map[string]any{"event_time": "2026-03-01T10:00:00.000Z", "event_type": "record_erased", "event_state": "ConsentUnknown", "event_by": "pii_controller"}}}),
			0, []string{"is a valid consent record."}},
		{"a valid receipt's JWS", compactJWS("consent-receipt+jwt", lintReceipt()), 0,
			[]string{"is a valid consent receipt (its signature was not checked: lint needs no key"}},
		{"a valid receipt's claims", asJSON(lintReceipt()), 0, []string{"is a valid consent receipt."}},
		{"a missing field", asJSON(with(lintRecord(), func(m map[string]any) { delete(m, "events") })), 1,
			[]string{"1 violation of the consent record schema", "(root): missing property 'events'"}},
		{"an unknown field", asJSON(with(lintRecord(), func(m map[string]any) { m["nationalId"] = "12345678901" })), 1,
			[]string{"(root): additional properties 'nationalId' not allowed"}},
		{"a wrong type", asJSON(with(lintRecord(), func(m map[string]any) { m["receipt_ids"] = "019ab3c4" })), 1,
			[]string{"/receipt_ids: got string, want array"}},
		{"a state DPV does not have", asJSON(with(lintRecord(), func(m map[string]any) { m["consent_status"] = "Accepted" })), 1,
			[]string{"/consent_status: value must be one of"}},
		{"a bad date-time", asJSON(with(lintRecord(), func(m map[string]any) { m["valid_until"] = "tomorrow" })), 1,
			[]string{"/valid_until: 'tomorrow' is not valid date-time"}},
		{"a bad pattern, deep", asJSON(with(lintRecord(), func(m map[string]any) { m["notice"].(map[string]any)["text_sha256"] = "xyz" })), 1,
			[]string{"/notice/text_sha256: 'xyz' does not match pattern"}},
		{"an erased record that keeps the person", asJSON(with(lintRecord(), func(m map[string]any) { m["consent_status"] = "ConsentUnknown" })), 1,
			[]string{"/pii_principal_id: got string, want null"}},
		{"a withdrawal receipt without withdrawnBy", compactJWS("consent-receipt+jwt", with(lintReceipt(), func(m map[string]any) { m["decision"] = "withdrawn" })), 1,
			[]string{"violation of the consent receipt schema", "(root): missing property 'withdrawnBy'"}},
		{"an erasure receipt", compactJWS("erasure-receipt+jwt", lintReceipt()), 1,
			[]string{`(JWS header)/typ: is "erasure-receipt+jwt", not "consent-receipt+jwt"`}},
		{"not JSON", "hello", 1, []string{"not JSON, nor a compact JWS"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			if err := os.WriteFile(file, []byte(c.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := flowdtest.RunCLI(func(string) string { return "" }, "", "receipts", "lint", file)
			if got := command.ExitCode(err); got != c.exit {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", got, err, c.exit, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output does not say %q:\n%s", w, out)
				}
			}
			if c.exit == 0 && strings.Count(out, "\n") != 1 {
				t.Errorf("OK is more than one line:\n%s", out)
			}
		})
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"receipts", "lint"}, "name the record's or receipt's file"},
		{"a file that is not there", []string{"receipts", "lint", filepath.Join(dir, "missing.json")}, "no such file"},
		{"a flag it does not know", []string{"receipts", "lint", "--jwks", "x", "f.json"}, "flag provided but not defined"},
	} {
		out, err := flowdtest.RunCLI(func(string) string { return "" }, "", c.args...)
		if command.ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: exit %d, %v, %q; want 2 saying %q", c.name, command.ExitCode(err), err, out, c.want)
		}
	}
	if out, err := flowdtest.RunCLI(func(string) string { return "" }, compactJWS("consent-receipt+jwt", lintReceipt()), "receipts", "lint", "-"); err != nil ||
		!strings.HasPrefix(out, "OK: - is a valid consent receipt") {
		t.Errorf("from stdin: %q %v", out, err)
	}
}
