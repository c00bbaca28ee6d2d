// Package httpkit is what the handlers of flowd's surfaces (the API, the
// OAuth provider, the console, the person's pages) share: reading a request
// (a JSON body, a form, the caller), writing an answer (JSON, a problem, a
// page), the API's authentication, and the steps the sign-ins have in
// common. The surfaces import it and never one another.
package httpkit
