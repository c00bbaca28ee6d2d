package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// TestStreamChangesAreAudited: creating, updating, pausing and deleting a
// stream each leave one entry in the data holder's audit log, naming the
// stream and never its Authorization header; a refused change leaves none.
func TestStreamChangesAreAudited(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/ssf/streams", webtest.TokB, `{"delivery":{"method":"urn:ietf:rfc:8935",
		"endpoint_url":"https://receiver.tax.example/ssf","authorization_header":"Bearer very-secret"},
		"events_requested":["urn:flowd:event:consent-revoked"]}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var s struct {
		ID string `json:"stream_id"`
	}
	if err := json.Unmarshal(r.Body, &s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", "/ssf/streams", `{"stream_id":"` + s.ID + `","description":"income"}`},
		{"POST", "/ssf/status", `{"stream_id":"` + s.ID + `","status":"paused","reason":"maintenance"}`},
		{"DELETE", "/ssf/streams?stream_id=" + s.ID, ""},
	} {
		if r := e.Call(t, c.method, c.path, webtest.TokB, c.body); r.Status/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
	if r := e.Call(t, "POST", "/ssf/status", webtest.TokA, `{"stream_id":"`+s.ID+`","status":"paused"}`); r.Status != http.StatusNotFound {
		t.Errorf("another organization's status change: %d %s", r.Status, r.Body)
	}
	for _, action := range []string{"ssf_stream.create", "ssf_stream.update", "ssf_stream.status", "ssf_stream.delete"} {
		if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and status = $1 and reference_id = $2`, action, s.ID); n != 1 {
			t.Errorf("%d audit entries %s of the stream, want 1", n, action)
		}
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and (url like '%very-secret%' or reference_id like '%very-secret%')`); n != 0 {
		t.Errorf("%d audit entries show the Authorization header", n)
	}
	if strings.Contains(string(r.Body), "very-secret") {
		t.Errorf("the stream's answer shows its Authorization header: %s", r.Body)
	}
}
