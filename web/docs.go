package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/openapi"
)

// apiDocs is the OpenAPI document for this service's base URL, built once at
// start: its JSON, that JSON's ETag, and the rendered reference page.
type apiDocs struct {
	json []byte
	etag string
	page []byte
}

// newAPIDocs builds the documentation for baseURL. The document is embedded
// and its tests load and render it, so a failure here is a build defect.
func (s *Server) newAPIDocs() *apiDocs {
	baseURL := openapi.DefaultBaseURL
	if s.cfg != nil && s.cfg.BaseURL != nil {
		baseURL = s.cfg.BaseURL.String()
	}
	raw, err := openapi.JSON(baseURL)
	if err != nil {
		panic(err)
	}
	doc, err := openapi.Load(baseURL)
	if err != nil {
		panic(err)
	}
	model, err := openapi.Reference(doc, raw, baseURL)
	if err != nil {
		panic(err)
	}
	var page bytes.Buffer
	if err := pages.Docs(model).Render(context.Background(), &page); err != nil {
		panic(err)
	}
	sum := sha256.Sum256(raw)
	return &apiDocs{json: raw, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, page: page.Bytes()}
}

// handleOpenAPI handles "GET /api/openapi.json": the OpenAPI 3.1 document,
// public, cacheable and readable from other origins (API tools load it from
// their own pages).
func (d *apiDocs) handleOpenAPI(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("ETag", d.etag)
	h.Set("Access-Control-Allow-Origin", "*")
	if strings.Contains(c.Request().Header.Get("If-None-Match"), d.etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, d.json)
}

// handleDocs handles "GET /docs": the document rendered for people.
func (d *apiDocs) handleDocs(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return c.HTMLBlob(http.StatusOK, d.page)
}
