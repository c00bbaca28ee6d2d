package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/openapi"
)

// apiDocs is the OpenAPI document for one base URL: its JSON and ETag, made
// once at start, and the reference page, rendered at its first request.
type apiDocs struct {
	baseURL string
	json    []byte
	etag    string

	pageOnce sync.Once
	page     []byte
	gzipped  []byte // page, gzipped once: a tenth of its size on the wire
	pageErr  error
}

// docsByBaseURL shares the documentation among the servers of one process
// (tests start many): building the page costs far more than serving it.
var docsByBaseURL sync.Map // base URL → *apiDocs

// newAPIDocs returns the documentation for the server's base URL. The
// document is embedded and its tests load it, so a failure is a build defect.
func (s *Server) newAPIDocs() *apiDocs {
	baseURL := openapi.DefaultBaseURL
	if s.cfg != nil && s.cfg.BaseURL != nil {
		baseURL = s.cfg.BaseURL.String()
	}
	if d, ok := docsByBaseURL.Load(baseURL); ok {
		return d.(*apiDocs)
	}
	raw, err := openapi.JSON(baseURL)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(raw)
	d, _ := docsByBaseURL.LoadOrStore(baseURL, &apiDocs{baseURL: baseURL, json: raw, etag: `"` + hex.EncodeToString(sum[:12]) + `"`})
	return d.(*apiDocs)
}

// renderPage builds the reference page from the parsed document, once.
func (d *apiDocs) renderPage() ([]byte, error) {
	d.pageOnce.Do(func() {
		doc, err := openapi.Load(d.baseURL)
		if err != nil {
			d.pageErr = err
			return
		}
		model, err := openapi.Reference(doc, d.json, d.baseURL)
		if err != nil {
			d.pageErr = err
			return
		}
		var buf bytes.Buffer
		if err := pages.Docs(model).Render(context.Background(), &buf); err != nil {
			d.pageErr = err
			return
		}
		d.page = buf.Bytes()
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		_, _ = w.Write(d.page)
		if err := w.Close(); err != nil {
			d.pageErr = err
			return
		}
		d.gzipped = z.Bytes()
	})
	return d.page, d.pageErr
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
	page, err := d.renderPage()
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=300")
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(c.Request().Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		return c.Blob(http.StatusOK, echo.MIMETextHTMLCharsetUTF8, d.gzipped)
	}
	return c.HTMLBlob(http.StatusOK, page)
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip.
func acceptsGzip(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
