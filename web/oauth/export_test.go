package oauth

// What the tests of oauth_test reach of the package's own.

var ParseTokenRequest = parseTokenRequest

type (
	TokenResponse      = tokenResponse
	TokenErrorResponse = tokenErrorResponse
)
