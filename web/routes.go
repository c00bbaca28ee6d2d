package web

import (
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/assets"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// opsRoutes lists the routes of the operations listener (FLOWD_OPS_ADDR),
// which cmd/flowd serves beside Go's profiler.
func (s *Server) opsRoutes(e *echo.Echo) {
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler))
}

// routes lists every route of flowd, grouped by who may call it.
func (s *Server) routes() {
	e := s.echo
	if s.tracing.Enabled() {
		e.Use(s.traceRequests)
	}
	e.Use(s.requestID, s.observe, s.recoverPanics, s.securityHeaders, s.limitBody())
	// Each surface's handlers: the built-in provider (web/oauth), the API
	// (web/api), the person's pages (web/person) and the console (web/console,
	// its pages of API clients and sessions in web/console/access).
	op, a, pp, cs, ac := s.oauth, s.api, s.person, s.console, s.access

	// The front page: where each surface is.
	e.GET("/", s.handleHome)

	// Operations: anyone who can reach the port; metrics only while there
	// is no operations listener (opsRoutes).
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	if s.cfg.OpsAddr == "" {
		e.GET("/metrics", echo.WrapHandler(s.metrics.handler))
	}

	// The built-in OAuth 2.0 provider: public, client authentication in the handlers.
	e.POST("/oauth/token", op.HandleToken)
	e.POST("/oauth/revoke", op.HandleRevoke)
	e.POST("/oauth/introspect", op.HandleIntrospect)
	e.GET("/oauth/jwks", op.HandleJWKS)
	e.GET("/.well-known/openid-configuration", op.HandleDiscovery)
	e.GET("/.well-known/oauth-authorization-server", op.HandleDiscovery)

	// Webhook receivers: an organization's public keys that verify v1a
	// signatures, public (they hold no secret) and cacheable.
	e.GET("/webhooks/:organizationId/keys", a.HandleWebhookKeys)

	// The built-in provider's interactive side: browsers and relying parties.
	e.GET("/oauth/authorize", op.HandleAuthorize)
	e.POST("/oauth/authorize", op.HandleAuthorize)
	e.GET("/idp/login", op.HandleLoginForm)
	e.POST("/idp/login", op.HandleLoginSubmit)
	e.GET("/oauth/userinfo", op.HandleUserInfo)
	e.POST("/oauth/userinfo", op.HandleUserInfo)
	e.GET("/oauth/end_session", op.HandleEndSession)
	e.POST("/oauth/end_session", op.HandleEndSession)

	// The API: bearer token, organization from the token, scopes per route;
	// authenticate also holds the token's client to its rate limit.
	// Authentication is part of each route, not of the group: a group's
	// middleware also runs for paths and methods it does not route, which
	// then answered 401 where 404 or 405 is right. Every POST honours
	// Idempotency-Key through Idempotent (flow creation's variant compares
	// the flow it asks for), after authentication.
	authenticate, requireScope := httpkit.Authenticate(s.bearer, s.limits), httpkit.RequireScope
	api := e.Group("/api")
	api.GET("/flows", a.HandleFlowList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.POST("/flows", a.HandleFlowCreate, authenticate, requireScope(identity.ScopeFlowsWrite), a.IdempotentFlowCreate)
	api.GET("/flows/:id", a.HandleFlowGet, authenticate, requireScope(identity.ScopeFlowsRead))
	api.DELETE("/flows/:id", a.HandleFlowDelete, authenticate, requireScope(identity.ScopeFlowsDelete))
	api.POST("/flows/:id/cancel", a.HandleFlowCancel, authenticate, requireScope(identity.ScopeFlowsWrite), a.Idempotent)
	api.POST("/flows/:id/withdraw", a.HandleFlowWithdraw, authenticate, requireScope(identity.ScopeFlowsWrite), a.Idempotent)
	api.POST("/flows/:id/uses", a.HandleUseCreate, authenticate, requireScope(identity.ScopeFlowsWrite), a.Idempotent)
	api.GET("/flows/:id/uses", a.HandleUseList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/flows/:id/consent-record", a.HandleConsentRecord, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/flows/:id/attachments", a.HandleAttachmentList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/flows/:id/attachments/:attachmentId", a.HandleAttachmentGet, authenticate, requireScope(identity.ScopeFlowsRead))
	api.POST("/receipts/subject", a.HandleReceiptSubject, authenticate, requireScope(identity.ScopeFlowsRead), a.Idempotent)
	api.GET("/events", a.HandleEventList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/events/:id", a.HandleEventGet, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/event-types", a.HandleEventTypes, authenticate, requireScope(identity.ScopeFlowsRead))
	api.POST("/events/:id/redeliver", a.HandleEventRedeliver, authenticate, requireScope(identity.ScopeWebhooksManage), a.Idempotent)
	api.GET("/tasks", a.HandleTaskList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/flow-definitions", a.HandleDefinitionList, authenticate, requireScope(identity.ScopeDefinitionsRead))
	api.POST("/flow-definitions", a.HandleDefinitionCreate, authenticate, requireScope(identity.ScopeDefinitionsWrite), a.Idempotent)
	api.GET("/flow-definitions/:id", a.HandleDefinitionGet, authenticate, requireScope(identity.ScopeDefinitionsRead))
	api.GET("/flow-definitions/:id/versions/:version", a.HandleDefinitionGet, authenticate, requireScope(identity.ScopeDefinitionsRead))
	api.POST("/flow-definitions/:id/versions", a.HandleDefinitionPublish, authenticate, requireScope(identity.ScopeDefinitionsWrite), a.Idempotent)
	api.POST("/flow-definitions/:id/retire", a.HandleDefinitionRetire, authenticate, requireScope(identity.ScopeDefinitionsWrite), a.Idempotent)
	api.GET("/webhook-endpoints", a.HandleEndpointList, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.POST("/webhook-endpoints", a.HandleEndpointCreate, authenticate, requireScope(identity.ScopeWebhooksManage), a.Idempotent)
	api.GET("/webhook-endpoints/:id", a.HandleEndpointGet, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.PATCH("/webhook-endpoints/:id", a.HandleEndpointUpdate, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.DELETE("/webhook-endpoints/:id", a.HandleEndpointDelete, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.POST("/webhook-endpoints/:id/recover", a.HandleEndpointRecover, authenticate, requireScope(identity.ScopeWebhooksManage), a.Idempotent)
	api.POST("/webhook-endpoints/:id/test", a.HandleEndpointTest, authenticate, requireScope(identity.ScopeWebhooksManage), a.Idempotent)
	api.GET("/webhook-endpoints/:id/recoveries", a.HandleRecoveryList, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.GET("/webhook-endpoints/:id/recoveries/:recoveryId", a.HandleRecoveryGet, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.POST("/webhook-recoveries", a.HandleFlowURLRecover, authenticate, requireScope(identity.ScopeWebhooksManage), a.Idempotent)
	api.GET("/webhook-recoveries", a.HandleFlowURLRecoveryList, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.GET("/webhook-recoveries/:recoveryId", a.HandleFlowURLRecoveryGet, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.POST("/erasures", a.HandleErasureCreate, authenticate, requireScope(identity.ScopeErasuresWrite), a.Idempotent)
	api.GET("/erasures", a.HandleErasureList, authenticate, requireScope(identity.ScopeErasuresWrite))
	api.GET("/erasures/:id", a.HandleErasureGet, authenticate, requireScope(identity.ScopeErasuresWrite))
	api.POST("/resources", a.HandleResourceCreate, authenticate, requireScope(identity.ScopeResourcesManage), a.Idempotent)
	api.GET("/resources", a.HandleResourceList, authenticate, requireScope(identity.ScopeResourcesManage))

	// Shared Signals (OpenID SSF 1.0): the transmitter's configuration,
	// public; a data holder's streams, by its receivers' tokens. Echo reads
	// ':' as a parameter, so the subject endpoints' is escaped.
	e.GET("/.well-known/ssf-configuration", a.HandleSSFConfiguration)
	manageSSF := requireScope(identity.ScopeSSFManage)
	e.POST("/ssf/streams", a.HandleStreamCreate, authenticate, manageSSF)
	e.GET("/ssf/streams", a.HandleStreamGet, authenticate, manageSSF)
	e.PATCH("/ssf/streams", a.HandleStreamUpdate, authenticate, manageSSF)
	e.PUT("/ssf/streams", a.HandleStreamUpdate, authenticate, manageSSF)
	e.DELETE("/ssf/streams", a.HandleStreamDelete, authenticate, manageSSF)
	e.GET("/ssf/status", a.HandleStreamStatusGet, authenticate, manageSSF)
	e.POST("/ssf/status", a.HandleStreamStatusSet, authenticate, manageSSF)
	e.POST("/ssf/verify", a.HandleStreamVerify, authenticate, manageSSF)
	e.POST("/ssf/subjects\\:add", a.HandleSubjectAdd, authenticate, manageSSF)
	e.POST("/ssf/subjects\\:remove", a.HandleSubjectRemove, authenticate, manageSSF)
	e.POST("/ssf/poll/:streamId", a.HandlePoll, authenticate, manageSSF)

	// Consent receipts: public; anyone holding a receipt may check it.
	e.POST("/api/receipts/verify", a.HandleReceiptVerify)
	e.GET("/receipts/verify", pp.HandleReceiptVerifyPage)
	e.POST("/receipts/verify", pp.HandleReceiptVerifyPage)

	// API documentation: public; the document may be read from any origin.
	docs := s.newAPIDocs()
	e.GET("/api/openapi.json", docs.handleOpenAPI)
	e.OPTIONS("/api/openapi.json", handlePublicPreflight)
	e.GET("/docs", docs.handleDocs)
	e.GET("/schemas/consent-record.json", a.HandleConsentRecordSchema)

	// Consent pages: the end user, by link.
	consentPages := e.Group("/consent", pp.ConsentCSRF())
	consentPages.GET("/:token", pp.HandleConsentPage)
	consentPages.POST("/:token", pp.HandleConsentDecision)
	consentPages.GET("/:token/login", pp.HandleConsentProve)
	consentPages.POST("/:token/withdraw", pp.HandleConsentWithdraw)
	// Sign-in of the end user; consentIdentityOf(c) gives the proven identity.
	e.GET("/consent/auth/login", pp.HandleConsentLogin)
	e.GET("/consent/auth/callback", pp.HandleConsentCallback)
	e.POST("/consent/auth/logout", pp.HandleConsentLogout)
	e.GET("/consent/signed-in", pp.HandleConsentSignedIn)
	e.GET("/consent/signed-out", pp.HandleConsentSignedOut)
	// The person's own page: every consent of the person signed in, on the
	// consent session; its withdrawal form carries the session's CSRF token.
	e.GET("/my", pp.HandleMy)
	e.GET("/my/login", pp.HandleMyLogin)
	e.GET("/my/:flow/withdraw", pp.HandleMyWithdrawPage)
	e.POST("/my/:flow/withdraw", pp.HandleMyWithdraw)
	e.POST("/my/erasure-requests", pp.HandleMyErasureRequest)

	// Console: organization staff, by session.
	// Sign-in: RequireStaff admits a session (staffOf, csrfTokenOf) and
	// checks the CSRF token of every POST; RequireAdmin admits admins.
	requireAdmin := console.RequireAdmin
	e.GET("/console/auth/login", cs.HandleConsoleLogin)
	e.GET("/console/auth/callback", cs.HandleConsoleCallback)
	e.POST("/console/auth/logout", cs.HandleConsoleLogout)
	e.GET("/console/signed-out", cs.HandleConsoleSignedOut)
	// The console's pages: viewers see, admins change.
	staff := e.Group("/console", cs.RequireStaff)
	staff.GET("", cs.HandleConsoleHome).Name = "console.home"
	staff.GET("/flows", cs.HandleConsoleFlows).Name = "console.flows"
	staff.GET("/flows/:id", cs.HandleConsoleFlow).Name = "console.flow"
	staff.POST("/flows/:id/reveal", cs.HandleConsoleRevealNationalID, requireAdmin)
	staff.POST("/flows/:id/incidents/:incident/retry", cs.HandleConsoleRetryIncident, requireAdmin).Name = "console.flow.retry"
	staff.POST("/flows/:id/events/:event/redeliver", cs.HandleConsoleRedeliver, requireAdmin).Name = "console.flow.redeliver"
	staff.GET("/flows/:id/cancel", cs.HandleConsoleCancelConfirm, requireAdmin)
	staff.POST("/flows/:id/cancel", cs.HandleConsoleCancel, requireAdmin)
	staff.GET("/flows/:id/receipts/:attachmentId", cs.HandleConsoleReceipt)
	staff.GET("/flows/:id/withdraw", cs.HandleConsoleWithdrawConfirm, requireAdmin)
	staff.POST("/flows/:id/withdraw", cs.HandleConsoleWithdraw, requireAdmin)
	staff.GET("/flows/:id/delete", cs.HandleConsoleDeleteConfirm, requireAdmin)
	staff.POST("/flows/:id/delete", cs.HandleConsoleDelete, requireAdmin)
	staff.GET("/deletions", cs.HandleConsoleDeletions).Name = "console.deletions"
	staff.GET("/erasures", cs.HandleConsoleErasures).Name = "console.erasures"
	staff.GET("/resources", cs.HandleConsoleResources).Name = "console.resources"
	staff.POST("/resources", cs.HandleConsoleCreateResource, requireAdmin)
	staff.GET("/streams", cs.HandleConsoleStreams).Name = "console.streams"
	staff.POST("/erasures/confirm", cs.HandleConsoleEraseConfirm, requireAdmin)
	staff.POST("/erasures", cs.HandleConsoleErase, requireAdmin)
	staff.GET("/erasures/:id/receipt", cs.HandleConsoleErasureReceipt)
	staff.GET("/erasures/:id/kept/:receiptId", cs.HandleConsoleKeptReceipt)
	staff.GET("/definitions", cs.HandleConsoleDefinitions).Name = "console.definitions"
	staff.GET("/definitions/new", cs.HandleConsoleNewDefinition, requireAdmin)
	staff.POST("/definitions", cs.HandleConsoleSaveDefinition, requireAdmin)
	staff.GET("/definitions/:id", cs.HandleConsoleDefinition)
	staff.GET("/definitions/:id/publish", cs.HandleConsolePublishForm, requireAdmin)
	staff.POST("/definitions/:id/publish", cs.HandleConsoleSaveDefinition, requireAdmin)
	staff.GET("/definitions/:id/retire", cs.HandleConsoleRetireConfirm, requireAdmin)
	staff.POST("/definitions/:id/retire", cs.HandleConsoleRetire, requireAdmin)
	staff.GET("/credentials", ac.HandleConsoleCredentials).Name = "console.credentials"
	staff.GET("/credentials/clients/new", ac.HandleConsoleNewClient, requireAdmin)
	staff.POST("/credentials/clients", ac.HandleConsoleCreateClient, requireAdmin)
	staff.POST("/credentials/clients/:id/dpop", ac.HandleConsoleClientDPoP, requireAdmin)
	staff.GET("/credentials/clients/:id/rate-limit", ac.HandleConsoleClientRateLimit, requireAdmin)
	staff.POST("/credentials/clients/:id/rate-limit", ac.HandleConsoleSaveClientRateLimit, requireAdmin)
	staff.GET("/credentials/clients/:id/rotate", ac.HandleConsoleRotateClientConfirm, requireAdmin)
	staff.POST("/credentials/clients/:id/rotate", ac.HandleConsoleRotateClient, requireAdmin)
	staff.GET("/credentials/clients/:id/revoke", ac.HandleConsoleRevokeClientConfirm, requireAdmin)
	staff.GET("/credentials/clients/:id/keys", ac.HandleConsoleClientKeys, requireAdmin)
	staff.POST("/credentials/clients/:id/keys", ac.HandleConsoleReplaceClientKeys, requireAdmin)
	staff.POST("/credentials/clients/:id/revoke", ac.HandleConsoleRevokeClient, requireAdmin)
	staff.POST("/credentials/webhook-secret/reveal", ac.HandleConsoleRevealWebhookSecret, requireAdmin)
	staff.GET("/credentials/webhook-secret/rotate", ac.HandleConsoleRotateWebhookSecretConfirm, requireAdmin)
	staff.POST("/credentials/webhook-secret/rotate", ac.HandleConsoleRotateWebhookSecret, requireAdmin)
	staff.GET("/webhooks", cs.HandleConsoleEndpoints).Name = "console.webhooks"
	staff.GET("/webhooks/new", cs.HandleConsoleNewEndpoint, requireAdmin)
	staff.GET("/webhooks/deliveries", cs.HandleConsoleDeliveries).Name = "console.deliveries"
	staff.POST("/webhooks/deliveries/:id/retry", cs.HandleConsoleRetryDelivery, requireAdmin)
	staff.POST("/webhooks", cs.HandleConsoleCreateEndpoint, requireAdmin)
	staff.GET("/webhooks/:id", cs.HandleConsoleEndpoint).Name = "console.webhook"
	staff.POST("/webhooks/:id/recover", cs.HandleConsoleRecover, requireAdmin)
	staff.POST("/webhooks/recover", cs.HandleConsoleRecoverFlowURLs, requireAdmin)
	staff.POST("/webhooks/keys/rotate", cs.HandleConsoleRotateSigningKey, requireAdmin)
	staff.POST("/webhooks/:id/test", cs.HandleConsoleSendTestEvent, requireAdmin)
	staff.GET("/webhooks/:id/edit", cs.HandleConsoleEditEndpoint, requireAdmin)
	staff.POST("/webhooks/:id", cs.HandleConsoleSaveEndpoint, requireAdmin)
	staff.GET("/webhooks/:id/enable", cs.HandleConsoleEnableEndpointConfirm, requireAdmin)
	staff.POST("/webhooks/:id/enable", cs.HandleConsoleEnableEndpoint, requireAdmin)
	staff.POST("/webhooks/:id/disable", cs.HandleConsoleEnableEndpoint, requireAdmin)
	staff.GET("/webhooks/:id/delete", cs.HandleConsoleDeleteEndpointConfirm, requireAdmin)
	staff.POST("/webhooks/:id/delete", cs.HandleConsoleDeleteEndpoint, requireAdmin)
	staff.GET("/settings", cs.HandleConsoleSettings).Name = "console.settings"
	staff.POST("/settings", cs.HandleConsoleSaveSettings, requireAdmin)
	staff.GET("/audit", cs.HandleConsoleAudit, requireAdmin).Name = "console.audit"
	// Sessions: everyone ends their own, admins anyone's in the organization.
	staff.GET("/sessions", ac.HandleConsoleSessions).Name = "console.sessions"
	staff.GET("/sessions/others/end", ac.HandleConsoleEndOtherSessionsConfirm)
	staff.POST("/sessions/others/end", ac.HandleConsoleEndOtherSessions)
	staff.GET("/sessions/:id/end", ac.HandleConsoleEndSessionConfirm)
	staff.POST("/sessions/:id/end", ac.HandleConsoleEndSession)
	staff.GET("/sessions/:id/end-all", ac.HandleConsoleEndPersonSessionsConfirm, requireAdmin)
	staff.POST("/sessions/:id/end-all", ac.HandleConsoleEndPersonSessions, requireAdmin)

	// Static assets, embedded in the binary.
	static, _ := fs.Sub(assets.FS, ".")
	e.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/assets/", cacheAssets(http.FileServer(http.FS(filesOnly{static}))))))
}
