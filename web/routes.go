package web

import (
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/assets"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// routes lists every route of flowd, grouped by who may call it.
func (s *Server) routes() {
	e := s.echo
	e.Use(s.requestID, s.observe, s.recoverPanics, s.securityHeaders, s.limitBody())

	// Operations: anyone who can reach the port.
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler))

	// The built-in OAuth 2.0 provider: public, client authentication in the handlers.
	p := s.oauth
	e.POST("/oauth/token", p.HandleToken)
	e.POST("/oauth/revoke", p.HandleRevoke)
	e.POST("/oauth/introspect", p.HandleIntrospect)
	e.GET("/oauth/jwks", p.HandleJWKS)
	e.GET("/.well-known/openid-configuration", p.HandleDiscovery)
	e.GET("/.well-known/oauth-authorization-server", p.HandleDiscovery)

	// The built-in provider's interactive side: browsers and relying parties.
	e.GET("/oauth/authorize", p.HandleAuthorize)
	e.POST("/oauth/authorize", p.HandleAuthorize)
	e.GET("/idp/login", p.HandleLoginForm)
	e.POST("/idp/login", p.HandleLoginSubmit)
	e.GET("/oauth/userinfo", p.HandleUserInfo)
	e.POST("/oauth/userinfo", p.HandleUserInfo)
	e.GET("/oauth/end_session", p.HandleEndSession)
	e.POST("/oauth/end_session", p.HandleEndSession)

	// The API: bearer token, organization from the token, scopes per route;
	// authenticate also holds the token's client to its rate limit.
	// Authentication is part of each route, not of the group: a group's
	// middleware also runs for paths and methods it does not route, which
	// then answered 401 where 404 or 405 is right. Every POST honours
	// Idempotency-Key: flow creation in the flows module, the others
	// through idempotent, after authentication.
	authenticate, requireScope := httpkit.Authenticate(s.identity, s.limits), httpkit.RequireScope
	a := s.api
	api := e.Group("/api")
	api.GET("/flows", a.HandleFlowList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.POST("/flows", a.HandleFlowCreate, authenticate, requireScope(identity.ScopeFlowsWrite))
	api.GET("/flows/:id", a.HandleFlowGet, authenticate, requireScope(identity.ScopeFlowsRead))
	api.DELETE("/flows/:id", a.HandleFlowDelete, authenticate, requireScope(identity.ScopeFlowsDelete))
	api.POST("/flows/:id/cancel", a.HandleFlowCancel, authenticate, requireScope(identity.ScopeFlowsWrite), a.Idempotent)
	api.POST("/flows/:id/withdraw", a.HandleFlowWithdraw, authenticate, requireScope(identity.ScopeFlowsWrite), a.Idempotent)
	api.GET("/flows/:id/attachments", a.HandleAttachmentList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/flows/:id/attachments/:attachmentId", a.HandleAttachmentGet, authenticate, requireScope(identity.ScopeFlowsRead))
	api.POST("/receipts/subject", a.HandleReceiptSubject, authenticate, requireScope(identity.ScopeFlowsRead), a.Idempotent)
	api.GET("/events", a.HandleEventList, authenticate, requireScope(identity.ScopeFlowsRead))
	api.GET("/events/:id", a.HandleEventGet, authenticate, requireScope(identity.ScopeFlowsRead))
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
	api.GET("/webhook-endpoints/:id/recoveries", a.HandleRecoveryList, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.GET("/webhook-endpoints/:id/recoveries/:recoveryId", a.HandleRecoveryGet, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.POST("/webhook-recoveries", a.HandleFlowURLRecover, authenticate, requireScope(identity.ScopeWebhooksManage), a.Idempotent)
	api.GET("/webhook-recoveries", a.HandleFlowURLRecoveryList, authenticate, requireScope(identity.ScopeWebhooksManage))
	api.GET("/webhook-recoveries/:recoveryId", a.HandleFlowURLRecoveryGet, authenticate, requireScope(identity.ScopeWebhooksManage))

	// Consent receipts: public; anyone holding a receipt may check it.
	e.POST("/api/receipts/verify", a.HandleReceiptVerify)
	e.GET("/receipts/verify", s.handleReceiptVerifyPage)
	e.POST("/receipts/verify", s.handleReceiptVerifyPage)

	// API documentation: public; the document may be read from any origin.
	docs := s.newAPIDocs()
	e.GET("/api/openapi.json", docs.handleOpenAPI)
	e.OPTIONS("/api/openapi.json", handlePublicPreflight)
	e.GET("/docs", docs.handleDocs)

	// Consent pages: the end user, by link.
	consentPages := e.Group("/consent", s.consentCSRF())
	consentPages.GET("/:token", s.handleConsentPage)
	consentPages.POST("/:token", s.handleConsentDecision)
	consentPages.GET("/:token/login", s.handleConsentProve)
	consentPages.POST("/:token/withdraw", s.handleConsentWithdraw)
	// Sign-in of the end user (issue 6); consentIdentityOf(c) gives the proven identity.
	e.GET("/consent/auth/login", s.handleConsentLogin)
	e.GET("/consent/auth/callback", s.handleConsentCallback)
	e.POST("/consent/auth/logout", s.handleConsentLogout)
	e.GET("/consent/signed-in", s.handleConsentSignedIn)
	e.GET("/consent/signed-out", s.handleConsentSignedOut)

	// Console: organization staff, by session.
	// Sign-in (issue 6): requireStaff admits a session (staffOf, csrfTokenOf)
	// and checks the CSRF token of every POST; requireAdmin admits admins.
	e.GET("/console/auth/login", s.handleConsoleLogin)
	e.GET("/console/auth/callback", s.handleConsoleCallback)
	e.POST("/console/auth/logout", s.handleConsoleLogout)
	e.GET("/console/signed-out", s.handleConsoleSignedOut)
	// The console's pages (issue 8): viewers see, admins change.
	console := e.Group("/console", s.requireStaff)
	console.GET("", s.handleConsoleHome).Name = "console.home"
	console.GET("/flows", s.handleConsoleFlows).Name = "console.flows"
	console.GET("/flows/:id", s.handleConsoleFlow).Name = "console.flow"
	console.POST("/flows/:id/reveal", s.handleConsoleRevealNationalID, requireAdmin)
	console.POST("/flows/:id/incidents/:incident/retry", s.handleConsoleRetryIncident, requireAdmin).Name = "console.flow.retry"
	console.POST("/flows/:id/events/:event/redeliver", s.handleConsoleRedeliver, requireAdmin).Name = "console.flow.redeliver"
	console.GET("/flows/:id/cancel", s.handleConsoleCancelConfirm, requireAdmin)
	console.POST("/flows/:id/cancel", s.handleConsoleCancel, requireAdmin)
	console.GET("/flows/:id/receipts/:attachmentId", s.handleConsoleReceipt)
	console.GET("/flows/:id/withdraw", s.handleConsoleWithdrawConfirm, requireAdmin)
	console.POST("/flows/:id/withdraw", s.handleConsoleWithdraw, requireAdmin)
	console.GET("/flows/:id/delete", s.handleConsoleDeleteConfirm, requireAdmin)
	console.POST("/flows/:id/delete", s.handleConsoleDelete, requireAdmin)
	console.GET("/deletions", s.handleConsoleDeletions).Name = "console.deletions"
	console.GET("/definitions", s.handleConsoleDefinitions).Name = "console.definitions"
	console.GET("/definitions/new", s.handleConsoleNewDefinition, requireAdmin)
	console.POST("/definitions", s.handleConsoleSaveDefinition, requireAdmin)
	console.GET("/definitions/:id", s.handleConsoleDefinition)
	console.GET("/definitions/:id/publish", s.handleConsolePublishForm, requireAdmin)
	console.POST("/definitions/:id/publish", s.handleConsoleSaveDefinition, requireAdmin)
	console.GET("/definitions/:id/retire", s.handleConsoleRetireConfirm, requireAdmin)
	console.POST("/definitions/:id/retire", s.handleConsoleRetire, requireAdmin)
	console.GET("/credentials", s.handleConsoleCredentials).Name = "console.credentials"
	console.GET("/credentials/clients/new", s.handleConsoleNewClient, requireAdmin)
	console.POST("/credentials/clients", s.handleConsoleCreateClient, requireAdmin)
	console.POST("/credentials/clients/:id/dpop", s.handleConsoleClientDPoP, requireAdmin)
	console.GET("/credentials/clients/:id/rate-limit", s.handleConsoleClientRateLimit, requireAdmin)
	console.POST("/credentials/clients/:id/rate-limit", s.handleConsoleSaveClientRateLimit, requireAdmin)
	console.GET("/credentials/clients/:id/rotate", s.handleConsoleRotateClientConfirm, requireAdmin)
	console.POST("/credentials/clients/:id/rotate", s.handleConsoleRotateClient, requireAdmin)
	console.GET("/credentials/clients/:id/revoke", s.handleConsoleRevokeClientConfirm, requireAdmin)
	console.GET("/credentials/clients/:id/keys", s.handleConsoleClientKeys, requireAdmin)
	console.POST("/credentials/clients/:id/keys", s.handleConsoleReplaceClientKeys, requireAdmin)
	console.POST("/credentials/clients/:id/revoke", s.handleConsoleRevokeClient, requireAdmin)
	console.POST("/credentials/webhook-secret/reveal", s.handleConsoleRevealWebhookSecret, requireAdmin)
	console.GET("/credentials/webhook-secret/rotate", s.handleConsoleRotateWebhookSecretConfirm, requireAdmin)
	console.POST("/credentials/webhook-secret/rotate", s.handleConsoleRotateWebhookSecret, requireAdmin)
	console.GET("/webhooks", s.handleConsoleEndpoints).Name = "console.webhooks"
	console.GET("/webhooks/new", s.handleConsoleNewEndpoint, requireAdmin)
	console.POST("/webhooks", s.handleConsoleCreateEndpoint, requireAdmin)
	console.GET("/webhooks/:id", s.handleConsoleEndpoint).Name = "console.webhook"
	console.POST("/webhooks/:id/recover", s.handleConsoleRecover, requireAdmin)
	console.POST("/webhooks/recover", s.handleConsoleRecoverFlowURLs, requireAdmin)
	console.GET("/webhooks/:id/edit", s.handleConsoleEditEndpoint, requireAdmin)
	console.POST("/webhooks/:id", s.handleConsoleSaveEndpoint, requireAdmin)
	console.GET("/webhooks/:id/enable", s.handleConsoleEnableEndpointConfirm, requireAdmin)
	console.POST("/webhooks/:id/enable", s.handleConsoleEnableEndpoint, requireAdmin)
	console.POST("/webhooks/:id/disable", s.handleConsoleEnableEndpoint, requireAdmin)
	console.GET("/webhooks/:id/delete", s.handleConsoleDeleteEndpointConfirm, requireAdmin)
	console.POST("/webhooks/:id/delete", s.handleConsoleDeleteEndpoint, requireAdmin)
	console.GET("/settings", s.handleConsoleSettings).Name = "console.settings"
	console.POST("/settings", s.handleConsoleSaveSettings, requireAdmin)
	console.GET("/audit", s.handleConsoleAudit, requireAdmin).Name = "console.audit"
	// Sessions: everyone ends their own, admins anyone's in the organization.
	console.GET("/sessions", s.handleConsoleSessions).Name = "console.sessions"
	console.GET("/sessions/others/end", s.handleConsoleEndOtherSessionsConfirm)
	console.POST("/sessions/others/end", s.handleConsoleEndOtherSessions)
	console.GET("/sessions/:id/end", s.handleConsoleEndSessionConfirm)
	console.POST("/sessions/:id/end", s.handleConsoleEndSession)
	console.GET("/sessions/:id/end-all", s.handleConsoleEndPersonSessionsConfirm, requireAdmin)
	console.POST("/sessions/:id/end-all", s.handleConsoleEndPersonSessions, requireAdmin)

	// Static assets, embedded in the binary.
	static, _ := fs.Sub(assets.FS, ".")
	e.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/assets/", cacheAssets(http.FileServer(http.FS(filesOnly{static}))))))
}
