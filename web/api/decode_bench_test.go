package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/web/internal/httpkit"
)

// BenchmarkDecodeJSON decodes the body of a flow create, the API's hot path.
func BenchmarkDecodeJSON(b *testing.B) {
	const body = `{"nationalId":"12345678901","lastName":"Nordmann","redirectUrl":"https://bank.example/consent/done?application=4711",` +
		`"webhookUrl":"https://bank.example/hooks/flowd","referenceName":"Mortgage application 4711"}`
	r := strings.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, "/api/flows", r)
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c := echo.New().NewContext(req, nil)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(body)
		var dst createFlowRequest
		if err := httpkit.DecodeJSON(c, &dst); err != nil {
			b.Fatal(err)
		}
	}
}
