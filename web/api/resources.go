package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// resourceRequest is the body of POST /api/resources.
type resourceRequest struct {
	URI  string `json:"uri"`
	Name string `json:"name"`
}

// ResourceJSON is a resource as the API and `flowd resources … --json`
// show it, the OpenAPI document's Resource.
type ResourceJSON struct {
	ID        string     `json:"id"`
	URI       string     `json:"uri"`
	Name      string     `json:"name"`
	CreatedBy string     `json:"createdBy"`
	CreatedAt apiInstant `json:"createdAt"`
}

// NewResourceJSON renders r.
func NewResourceJSON(r consent.Resource) ResourceJSON {
	return ResourceJSON{ID: r.ID, URI: r.URI, Name: r.Name, CreatedBy: r.CreatedBy, CreatedAt: apiInstant(r.CreatedAt)}
}

// HandleResourceCreate handles "POST /api/resources": the organization
// registers a resource it serves as a data holder.
func (h *Handler) HandleResourceCreate(c echo.Context) error {
	var req resourceRequest
	in := func() consent.NewResource { return consent.NewResource{URI: req.URI, Name: req.Name} }
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, in().Normalize().Validate())
	}
	p := httpkit.Principal(c)
	answer := func(r consent.Resource) reply {
		body := NewResourceJSON(r)
		return reply{status: http.StatusCreated, header: http.Header{"Etag": {bodyTag(body)}}, body: body}
	}
	r, err := h.resources.CreateResource(c.Request().Context(), consent.Author{OrganizationID: p.OrganizationID, By: "client:" + p.ClientID}, in(),
		apiAudited(h, c, identity.AuditResourceCreate, func(r consent.Resource) (string, string) { return r.URI, r.Name }),
		keepReply(c, answer))
	if err != nil {
		return err
	}
	return h.writeReply(c, answer(r))
}

// HandleResourceList handles "GET /api/resources": the organization's
// resources, oldest first.
func (h *Handler) HandleResourceList(c echo.Context) error {
	list, err := h.resources.ListResources(c.Request().Context(), httpkit.Principal(c).OrganizationID)
	if err != nil {
		return err
	}
	out := struct {
		Data []ResourceJSON `json:"data"`
	}{Data: make([]ResourceJSON, len(list))}
	for i, r := range list {
		out.Data[i] = NewResourceJSON(r)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}
