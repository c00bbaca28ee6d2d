package httpkit

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
)

func TestConsoleFormCollectsFieldErrors(t *testing.T) {
	t.Parallel()
	form := url.Values{
		"name":    {"  Backend  "},
		"long":    {strings.Repeat("x", 11)},
		"ctl":     {"a\x07b"},
		"bidi":    {"Bank\u202Eknab"},
		"c1":      {"a\u0085b"},
		"box":     {"on"},
		"scopes":  {"flows:read", "flows:write"},
		"origins": {" https://a.example \n\n https://b.example\r\n"},
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := echo.New().NewContext(req, httptest.NewRecorder())
	f, err := BindForm(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Text("name", 10); got != "Backend" {
		t.Errorf("Text trims: %q", got)
	}
	f.Text("long", 10)
	f.Text("ctl", 10)
	f.Text("bidi", 10)
	f.Text("c1", 10)
	if !f.Bool("box") || f.Bool("missing") {
		t.Error("Bool")
	}
	if got := f.All("scopes"); len(got) != 2 {
		t.Errorf("All: %v", got)
	}
	if got := f.Lines("origins", 1); len(got) != 2 || got[0] != "https://a.example" || got[1] != "https://b.example" {
		t.Errorf("Lines: %q", got)
	}
	refused := f.Refused(apperr.InvalidFields([]apperr.FieldError{{Field: "referencePrefix", Message: "must be 2 to 8 letters"},
		{Field: "referencePrefix", Message: "is taken"}}), map[string]string{"referencePrefix": "reference_prefix"})
	if !refused || f.Refused(apperr.New(apperr.NotFound, "gone"), nil) {
		t.Error("Refused takes Invalid errors only")
	}
	want := map[string]string{
		"long":             "Use at most 10 characters.",
		"ctl":              "Remove the control and formatting characters.",
		"bidi":             "Remove the control and formatting characters.",
		"c1":               "Remove the control and formatting characters.",
		"origins":          "List at most 1 lines.",
		"reference_prefix": "Must be 2 to 8 letters. Is taken.",
	}
	if f.Valid() || len(f.Errors) != len(want) {
		t.Fatalf("errors %v", f.Errors)
	}
	for k, v := range want {
		if f.Errors[k] != v {
			t.Errorf("error of %s = %q, want %q", k, f.Errors[k], v)
		}
	}
}
