package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// IdempotentFlowCreate is Idempotent for "POST /api/flows". A create's
// request is compared as the flow it asks for, each field trimmed as the
// create trims it, so that a retry that differs only there (or in a member
// the create ignores) replays. The keys of creates made before the
// migration one_idempotency_store, carried over with the flows module's
// hash of the create's fields, replay until they expire (carriedCreate).
func (h *Handler) IdempotentFlowCreate(next echo.HandlerFunc) echo.HandlerFunc {
	return h.idempotent(next, func(c echo.Context, r *idempotency.Request, body []byte) {
		in, canonical, ok := createRequest(body)
		if !ok {
			// Not a create: the handler refuses it, and nothing is kept.
			return
		}
		r.Body = canonical
		r.Carried = carriedCreate{in: in, sandbox: httpkit.Principal(c).Sandbox}
	})
}

// createRequest reads body as a create, normalized, and returns it with the
// form its request is compared in; false when body is no create.
func createRequest(body []byte) (flows.NewFlow, []byte, bool) {
	var req createFlowRequest
	if json.Unmarshal(body, &req) != nil {
		return flows.NewFlow{}, nil, false
	}
	in := req.newFlow().Normalize()
	canonical, err := json.Marshal(in)
	return in, canonical, err == nil
}

// carriedCreate reads a create's key carried over from the flows module's
// flow_idempotency_keys (migration one_idempotency_store) for the create
// in.
type carriedCreate struct {
	in      flows.NewFlow
	sandbox bool
}

// Fingerprint implements idempotency.Carried: the text the flows module
// hashed for a create.
func (cc carriedCreate) Fingerprint(r idempotency.Request) (string, bool) {
	in := cc.in
	parts := []string{r.ClientID, strconv.FormatBool(cc.sandbox), in.NationalID, in.LastName, in.RedirectURL,
		in.WebhookURL, in.ReferenceName}
	// A definition was hashed only when named, parameters likewise.
	if in.FlowDefinitionID != "" || in.FlowDefinitionVersion != 0 {
		parts = append(parts, in.FlowDefinitionID, strconv.Itoa(in.FlowDefinitionVersion))
	}
	for _, name := range slices.Sorted(maps.Keys(in.Parameters)) {
		parts = append(parts, "parameter:"+name, in.Parameters[name])
	}
	for i, p := range parts {
		parts[i] = strconv.Quote(p)
	}
	return strings.Join(parts, ","), true
}

// Body implements idempotency.Carried: the create's answer, as
// HandleFlowCreate writes it.
func (carriedCreate) Body(flowID, referenceID, consentURL string) ([]byte, error) {
	buf, err := httpkit.EncodeJSON(createdBody(flows.Created{FlowID: flowID, ReferenceID: referenceID, ConsentURL: consentURL}))
	if err != nil {
		return nil, err
	}
	defer httpkit.PutJSONBuffer(buf)
	return bytes.Clone(buf.Bytes()), nil
}
