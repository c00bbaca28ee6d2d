package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// The Shared Signals transmitter's endpoints (OpenID SSF 1.0 §7, §8): the
// configuration, and the streams a data holder's receiver manages with a
// token of scope ssf:manage. Bodies use SSF's snake_case names.

// HandleSSFConfiguration handles "GET /.well-known/ssf-configuration".
func (h *Handler) HandleSSFConfiguration(c echo.Context) error {
	base := strings.TrimSuffix(h.cfg.BaseURL.String(), "/")
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return httpkit.WriteJSON(c, http.StatusOK, map[string]any{
		"spec_version":               ssf.SpecVersion,
		"issuer":                     base,
		"jwks_uri":                   base + "/oauth/jwks",
		"delivery_methods_supported": []string{ssf.DeliveryPush, ssf.DeliveryPoll},
		"configuration_endpoint":     base + "/ssf/streams",
		"status_endpoint":            base + "/ssf/status",
		"add_subject_endpoint":       base + "/ssf/subjects:add",
		"remove_subject_endpoint":    base + "/ssf/subjects:remove",
		"verification_endpoint":      base + "/ssf/verify",
		"authorization_schemes":      []map[string]string{{"spec_urn": "urn:ietf:rfc:6749"}},
		"default_subjects":           "ALL",
	})
}

// ssfDelivery is a stream's delivery as SSF writes it; authorization_header
// is taken, never shown.
type ssfDelivery struct {
	Method              string `json:"method"`
	EndpointURL         string `json:"endpoint_url,omitempty"`
	AuthorizationHeader string `json:"authorization_header,omitempty"`
}

// streamRequest is the body of POST, PATCH and PUT /ssf/streams. The
// transmitter's own fields are accepted, as a receiver sends back what it
// read, and ignored.
type streamRequest struct {
	StreamID        string          `json:"stream_id"`
	Delivery        *ssfDelivery    `json:"delivery"`
	EventsRequested *[]string       `json:"events_requested"`
	Description     *string         `json:"description"`
	Iss             json.RawMessage `json:"iss"`
	Aud             json.RawMessage `json:"aud"`
	EventsSupported json.RawMessage `json:"events_supported"`
	EventsDelivered json.RawMessage `json:"events_delivered"`
	MinVerification json.RawMessage `json:"min_verification_interval"`
	Inactivity      json.RawMessage `json:"inactivity_timeout"`
}

func (r streamRequest) config() ssf.StreamConfig {
	c := ssf.StreamConfig{EventsRequested: r.EventsRequested, Description: r.Description}
	if r.Delivery != nil {
		c.Delivery = &ssf.Delivery{Method: r.Delivery.Method, EndpointURL: r.Delivery.EndpointURL, AuthorizationHeader: r.Delivery.AuthorizationHeader}
	}
	return c
}

// StreamJSON is a stream's configuration as SSF 1.0 §8.1.1 shows it.
type StreamJSON struct {
	StreamID        string      `json:"stream_id"`
	Iss             string      `json:"iss"`
	Aud             any         `json:"aud"`
	EventsSupported []string    `json:"events_supported"`
	EventsRequested []string    `json:"events_requested"`
	EventsDelivered []string    `json:"events_delivered"`
	Delivery        ssfDelivery `json:"delivery"`
	Description     string      `json:"description,omitempty"`
}

func (h *Handler) streamJSON(s ssf.Stream) StreamJSON {
	var aud any = s.Audience
	if len(s.Audience) == 1 {
		aud = s.Audience[0]
	}
	return StreamJSON{StreamID: s.ID, Iss: strings.TrimSuffix(h.cfg.BaseURL.String(), "/"), Aud: aud,
		EventsSupported: ssf.EventsSupported, EventsRequested: s.EventsRequested, EventsDelivered: s.EventsDelivered,
		Delivery: ssfDelivery{Method: s.Delivery.Method, EndpointURL: s.Delivery.EndpointURL}, Description: s.Description}
}

// streamNotFound answers a stream of no one's, or another organization's.
func streamNotFound(err error) error {
	if errors.Is(err, ssf.ErrStreamNotFound) {
		return apperr.New(apperr.NotFound, "No such stream.")
	}
	return err
}

// streamAudit is a stream's audit detail: its delivery and status, never
// its Authorization header.
func streamAudit(s ssf.Stream) (string, string) {
	d := s.Delivery.Method + " " + s.Delivery.EndpointURL + ", " + string(s.Status)
	if s.Description != "" {
		d = s.Description + ": " + d
	}
	return s.ID, truncateAudit(d)
}

func truncateAudit(s string) string {
	if r := []rune(s); len(r) > 500 {
		return string(r[:499]) + "…"
	}
	return s
}

// HandleStreamCreate handles "POST /ssf/streams".
func (h *Handler) HandleStreamCreate(c echo.Context) error {
	var req streamRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.StreamID != "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is the transmitter's: leave it out"}})
	}
	p := httpkit.Principal(c)
	s, err := h.ssf.CreateStream(c.Request().Context(), ssf.Owner{OrganizationID: p.OrganizationID, ClientID: p.ClientID}, req.config(),
		apiAudited(h, c, identity.AuditStreamCreate, streamAudit))
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(c, http.StatusCreated, h.streamJSON(s))
}

// HandleStreamGet handles "GET /ssf/streams": one stream (stream_id) or
// all of the organization's.
func (h *Handler) HandleStreamGet(c echo.Context) error {
	ctx, org := c.Request().Context(), httpkit.Principal(c).OrganizationID
	if id := c.QueryParam("stream_id"); id != "" {
		s, err := h.ssf.Stream(ctx, org, id)
		if err != nil {
			return streamNotFound(err)
		}
		return httpkit.WriteJSON(c, http.StatusOK, h.streamJSON(s))
	}
	list, err := h.ssf.ListStreams(ctx, org)
	if err != nil {
		return err
	}
	out := make([]StreamJSON, len(list))
	for i, s := range list {
		out[i] = h.streamJSON(s)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleStreamUpdate handles "PATCH /ssf/streams" and, replacing what the
// receiver sets, "PUT /ssf/streams".
func (h *Handler) HandleStreamUpdate(c echo.Context) error {
	var req streamRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.StreamID == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is required"}})
	}
	replace := c.Request().Method == http.MethodPut
	s, err := h.ssf.UpdateStream(c.Request().Context(), httpkit.Principal(c).OrganizationID, req.StreamID, req.config(), replace,
		apiAudited(h, c, identity.AuditStreamUpdate, streamAudit))
	if err != nil {
		return streamNotFound(err)
	}
	return httpkit.WriteJSON(c, http.StatusOK, h.streamJSON(s))
}

// HandleStreamDelete handles "DELETE /ssf/streams".
func (h *Handler) HandleStreamDelete(c echo.Context) error {
	id := c.QueryParam("stream_id")
	if id == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is required"}})
	}
	err := h.ssf.DeleteStream(c.Request().Context(), httpkit.Principal(c).OrganizationID, id,
		apiAudited(h, c, identity.AuditStreamDelete, streamAudit))
	if err != nil {
		return streamNotFound(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// statusJSON is a stream's status (SSF 1.0 §8.1.2).
type statusJSON struct {
	StreamID string `json:"stream_id"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
}

// HandleStreamStatusGet handles "GET /ssf/status".
func (h *Handler) HandleStreamStatusGet(c echo.Context) error {
	id := c.QueryParam("stream_id")
	if id == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is required"}})
	}
	s, err := h.ssf.Stream(c.Request().Context(), httpkit.Principal(c).OrganizationID, id)
	if err != nil {
		return streamNotFound(err)
	}
	return httpkit.WriteJSON(c, http.StatusOK, statusJSON{StreamID: s.ID, Status: string(s.Status), Reason: s.StatusReason})
}

// HandleStreamStatusSet handles "POST /ssf/status".
func (h *Handler) HandleStreamStatusSet(c echo.Context) error {
	var req statusJSON
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.StreamID == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is required"}})
	}
	s, err := h.ssf.SetStatus(c.Request().Context(), httpkit.Principal(c).OrganizationID, req.StreamID, ssf.Status(req.Status), req.Reason,
		apiAudited(h, c, identity.AuditStreamStatus, func(s ssf.Stream) (string, string) {
			return s.ID, truncateAudit(string(s.Status) + ": " + s.StatusReason)
		}))
	if err != nil {
		return streamNotFound(err)
	}
	return httpkit.WriteJSON(c, http.StatusOK, statusJSON{StreamID: s.ID, Status: string(s.Status), Reason: s.StatusReason})
}

// HandleStreamVerify handles "POST /ssf/verify": a verification event on
// the stream, carrying the receiver's state.
func (h *Handler) HandleStreamVerify(c echo.Context) error {
	var req struct {
		StreamID string `json:"stream_id"`
		State    string `json:"state"`
	}
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.StreamID == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is required"}})
	}
	if err := h.ssf.Verify(c.Request().Context(), httpkit.Principal(c).OrganizationID, req.StreamID, req.State); err != nil {
		return streamNotFound(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// subjectRequest is the body of the subject endpoints (SSF 1.0 §8.1.3).
type subjectRequest struct {
	StreamID string          `json:"stream_id"`
	Subject  json.RawMessage `json:"subject"`
	Verified *bool           `json:"verified"`
}

// consentOf reads a consent's flow id from a subject: opaque, or complex
// with a consent member.
func consentOf(raw json.RawMessage) string {
	var s struct {
		Format  string `json:"format"`
		ID      string `json:"id"`
		Consent *struct {
			Format string `json:"format"`
			ID     string `json:"id"`
		} `json:"consent"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	switch {
	case s.Format == "opaque":
		return s.ID
	case s.Format == "complex" && s.Consent != nil && s.Consent.Format == "opaque":
		return s.Consent.ID
	}
	return ""
}

// HandleSubjectAdd handles "POST /ssf/subjects:add" and HandleSubjectRemove
// "POST /ssf/subjects:remove".
func (h *Handler) HandleSubjectAdd(c echo.Context) error { return h.subject(c, true) }

// HandleSubjectRemove: see HandleSubjectAdd.
func (h *Handler) HandleSubjectRemove(c echo.Context) error { return h.subject(c, false) }

func (h *Handler) subject(c echo.Context, add bool) error {
	var req subjectRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.StreamID == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "stream_id", Message: "is required"}})
	}
	ctx, org, consent := c.Request().Context(), httpkit.Principal(c).OrganizationID, consentOf(req.Subject)
	if add {
		if err := h.ssf.AddSubject(ctx, org, req.StreamID, consent); err != nil {
			return streamNotFound(err)
		}
		return c.NoContent(http.StatusOK)
	}
	if err := h.ssf.RemoveSubject(ctx, org, req.StreamID, consent); err != nil {
		return streamNotFound(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// pollRequest is an RFC 8936 §2.4 poll.
type pollRequest struct {
	MaxEvents         *int                       `json:"maxEvents"`
	ReturnImmediately bool                       `json:"returnImmediately"`
	Ack               []string                   `json:"ack"`
	SetErrs           map[string]json.RawMessage `json:"setErrs"`
}

// defaultPollEvents is how many SETs a poll that names no maxEvents gets.
const defaultPollEvents = 100

// HandlePoll handles "POST /ssf/poll/:streamId" (RFC 8936).
func (h *Handler) HandlePoll(c echo.Context) error {
	var req pollRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	in := ssf.PollRequest{MaxEvents: defaultPollEvents, ReturnImmediately: req.ReturnImmediately, Ack: req.Ack,
		SetErrs: make(map[string]ssf.SetErr, len(req.SetErrs))}
	if req.MaxEvents != nil {
		in.MaxEvents = *req.MaxEvents
	}
	for jti, raw := range req.SetErrs {
		var e struct {
			Err         string `json:"err"`
			Description string `json:"description"`
		}
		if json.Unmarshal(raw, &e) != nil {
			return apperr.InvalidFields([]apperr.FieldError{{Field: "setErrs", Message: `must map each SET's jti to {"err": "<code>", "description": "<text>"}`}})
		}
		in.SetErrs[jti] = ssf.SetErr{Err: e.Err, Description: e.Description}
	}
	out, err := h.ssf.Poll(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("streamId"), in)
	if err != nil {
		return streamNotFound(err)
	}
	return httpkit.WriteJSON(c, http.StatusOK, struct {
		SETs          map[string]string `json:"sets"`
		MoreAvailable bool              `json:"moreAvailable"`
	}{out.SETs, out.MoreAvailable})
}
