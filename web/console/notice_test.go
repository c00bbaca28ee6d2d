package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func TestNoticesOnlyFromTheirKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query, want string
	}{
		{WithNotice("/console/flows", "deleted", "ACME-7"), "Flow ACME-7 was deleted. It is listed in the deletions log."},
		{"/console/flows?notice=saved", "Settings saved. New flows use them at once."},
		{"/console/flows?notice=<script>", ""},
		{"/console/flows?notice=deleted&ref=" + strings.Repeat("A", 81), ""},
	}
	for _, tt := range tests {
		c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, tt.query, nil), httptest.NewRecorder())
		if got := noticeOf(c); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.query, got, tt.want)
		}
	}
}
