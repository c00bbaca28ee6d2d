package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/consent/record"
)

// HandleConsentRecord handles "GET /api/flows/:id/consent-record": the
// flow's consent in the shape of ISO/IEC TS 27560, which the schema at
// /schemas/consent-record.json describes. A flow deleted or erased answers
// what is left of its record; another organization's flow is a 404.
func (h *Handler) HandleConsentRecord(c echo.Context) error {
	rec, err := h.records.Record(c.Request().Context(), callerOf(c), c.Param("id"))
	if err != nil {
		return flowError(err)
	}
	return h.writeUnversioned(c, http.StatusOK, rec)
}

// schemaMaxAge is how long a client may keep the schema: it changes only
// with a release.
const schemaMaxAge = "public, max-age=3600"

// HandleConsentRecordSchema handles "GET /schemas/consent-record.json": the
// JSON Schema of consent records and receipts' claims, public and
// cacheable, its $id under flowd's base URL.
func (h *Handler) HandleConsentRecordSchema(c echo.Context) error {
	h.schemaOnce.Do(func() { h.schema = record.Schema(h.cfg.BaseURL.String()) })
	c.Response().Header().Set("Cache-Control", schemaMaxAge)
	c.Response().Header().Set("Access-Control-Allow-Origin", "*")
	return writeTagged(c, http.StatusOK, "application/schema+json", h.schema)
}
