package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestTwoSwedesOverTheAPI: with Swedish national ids, flows for
// 121212-1212 (born 2012), 121212+1212 (born 1912) and 201212121212 (the
// first, in twelve digits) are two people's. Each flow shows its id in the
// canonical twelve digits; a sign-in as 121212-1212 cannot answer the 1912
// person's request; the subject check tells the two apart; erasing
// 121212-1212 answers flowCount 2 and leaves the 1912 person's flow; a
// 10-digit number without its sign is refused.
func TestTwoSwedesOverTheAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithNationalIDFormat(nationalid.FormatSweden))
	young := e.Create(t, webtest.TokA, map[string]any{"nationalId": "121212-1212"})
	old := e.Create(t, webtest.TokA, map[string]any{"nationalId": "121212+1212"})
	e.Create(t, webtest.TokA, map[string]any{"nationalId": "201212121212"})
	for id, want := range map[string]string{young: "201212121212", old: "191212121212"} {
		var got struct {
			Flow struct{ Data struct{ NationalID string } }
		}
		r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "")
		if err := json.Unmarshal(r.Body, &got); err != nil || got.Flow.Data.NationalID != want {
			t.Errorf("flow %s shows %q (%v), want %q", id, got.Flow.Data.NationalID, err, want)
		}
	}
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"nationalId": "1212121212"})); r.Status != 400 ||
		strings.Join(r.Fields(t), ",") != "nationalId" || !strings.Contains(string(r.Body), "century") {
		t.Errorf("a 10-digit number without its sign: %d %s", r.Status, r.Body)
	}

	// The 2012 person's sign-in cannot answer the 1912 person's request.
	ctx := context.Background()
	f, err := e.Flows.Get(ctx, flows.Caller{OrganizationID: webtest.OrgA}, old)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := strings.CutPrefix(f.ConsentURL, "https://flowd.example/consent/")
	answer := consent.Answer{Accept: true, Language: "en"}
	if _, err := e.Journey.Decide(ctx, token, consent.Proof{NationalID: "121212-1212", ACR: assurance.DefaultACRMap[assurance.Substantial]}, answer); !errors.Is(err, consent.ErrWrongPerson) {
		t.Fatalf("the 2012 person answered the 1912 person's request: %v", err)
	}
	if _, err := e.Journey.Decide(ctx, token, consent.Proof{NationalID: "19121212-1212", ACR: assurance.DefaultACRMap[assurance.Substantial]}, answer); err != nil {
		t.Fatalf("the 1912 person's own answer: %v", err)
	}
	receipt := e.attachments(t, old)[0]
	for nationalID, matches := range map[string]any{"121212-1212": false, "121212+1212": true, "191212121212": true} {
		r := e.Call(t, "POST", "/api/receipts/subject", webtest.TokA, `{"receipt":"`+receipt+`","nationalId":"`+nationalID+`"}`)
		if r.Status != http.StatusOK || r.JSON(t)["matches"] != matches {
			t.Errorf("is %s the 1912 person's receipt's subject: %d %s, want %v", nationalID, r.Status, r.Body, matches)
		}
	}

	r := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"121212-1212"}`)
	if r.Status != http.StatusCreated || r.JSON(t)["flowCount"] != float64(2) {
		t.Fatalf("erasing 121212-1212: %d %s", r.Status, r.Body)
	}
	if r := e.Call(t, "GET", "/api/flows/"+old, webtest.TokA, ""); r.Status != http.StatusOK {
		t.Errorf("the 1912 person's flow after the 2012 person's erasure: %d", r.Status)
	}
	if r := e.Call(t, "GET", "/api/flows/"+young, webtest.TokA, ""); r.Status != http.StatusNotFound {
		t.Errorf("the 2012 person's flow after their erasure: %d", r.Status)
	}
}
