// client.mjs is an organization's integration written with oauth4webapi, an
// OAuth client that flowd does not use itself: it authenticates with
// private_key_jwt, binds tokens to a key with DPoP, calls the API, revokes and
// introspects. It prints what it observed as JSON; the Go test that runs it
// (internal/e2e/oauth_client_test.go) decides what is right.
//
// Input: FLOWD_CLIENT_TEST, a JSON object with issuer, keyClientId,
// dpopClientId and clientKey (the clients' private JWK, with its kid).
import * as oauth from 'oauth4webapi'

const input = JSON.parse(process.env.FLOWD_CLIENT_TEST)
const issuer = new URL(input.issuer)
// The test server speaks plain HTTP on 127.0.0.1.
const insecure = { [oauth.allowInsecureRequests]: true }

const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure))
const clientKey = await crypto.subtle.importKey('jwk', input.clientKey, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign'])
const clientAuth = oauth.PrivateKeyJwt({ key: clientKey, kid: input.clientKey.kid })
const keyClient = { client_id: input.keyClientId }
const dpopClient = { client_id: input.dpopClientId }
const flowsURL = new URL('/api/flows', issuer)
const out = {
  discovery: {
    tokenAuthMethods: as.token_endpoint_auth_methods_supported,
    tokenAuthAlgs: as.token_endpoint_auth_signing_alg_values_supported,
    dpopAlgs: as.dpop_signing_alg_values_supported,
    revocation: as.revocation_endpoint,
    introspection: as.introspection_endpoint,
  },
}

// nonceRetry runs request once more when the server asks for a fresh DPoP
// nonce, as RFC 9449 sections 8 and 9 expect of a client; the DPoP handle
// has kept the nonce the refusal carried.
async function nonceRetry(request) {
  try {
    return await request()
  } catch (err) {
    if (!oauth.isDPoPNonceError(err)) throw err
    out.nonceRetries = (out.nonceRetries ?? 0) + 1
    return await request()
  }
}

// refusal is what an OAuth error taught the client: its code and status.
function refusal(err) {
  if (err instanceof oauth.ResponseBodyError) return { error: err.error, status: err.status }
  if (err instanceof oauth.WWWAuthenticateChallengeError) {
    return { status: err.response.status, challenges: err.cause.map((c) => ({ scheme: c.scheme, error: c.parameters.error })) }
  }
  throw err
}

async function rawGet(headers) {
  const res = await fetch(flowsURL, { headers })
  return { status: res.status, wwwAuthenticate: res.headers.get('www-authenticate') }
}

// A private_key_jwt client without DPoP gets a bearer token and uses it.
const bearer = await oauth.processClientCredentialsResponse(as, keyClient,
  await oauth.clientCredentialsGrantRequest(as, keyClient, clientAuth, { scope: 'flows:read' }, insecure))
const bearerCall = await oauth.protectedResourceRequest(bearer.access_token, 'GET', flowsURL, undefined, undefined, insecure)
out.bearer = { tokenType: bearer.token_type, apiStatus: bearerCall.status }

// A client required to use DPoP is refused a token without a proof.
try {
  await oauth.processClientCredentialsResponse(as, dpopClient,
    await oauth.clientCredentialsGrantRequest(as, dpopClient, clientAuth, {}, insecure))
  out.withoutProof = { error: 'none: a token was issued' }
} catch (err) {
  out.withoutProof = refusal(err)
}

// With a proof, it gets a DPoP-bound token.
const keyPair = await oauth.generateKeyPair('ES256')
const DPoP = oauth.DPoP(dpopClient, keyPair)
const bound = await nonceRetry(async () => oauth.processClientCredentialsResponse(as, dpopClient,
  await oauth.clientCredentialsGrantRequest(as, dpopClient, clientAuth, {}, { ...insecure, DPoP })))
out.dpopKeyThumbprint = await thumbprint(keyPair.publicKey)

// The API accepts the token with a proof; keep the proof to replay it.
let sent
const capture = {
  [oauth.customFetch]: (url, init) => {
    sent = new Headers(init.headers)
    return fetch(url, init)
  },
}
const dpopCall = await nonceRetry(async () =>
  oauth.protectedResourceRequest(bound.access_token, 'GET', flowsURL, undefined, undefined, { ...insecure, ...capture, DPoP }))
out.dpop = { tokenType: bound.token_type, apiStatus: dpopCall.status }

// Without its proof, or as a bearer token, or with a proof used before, the
// token is refused.
out.replayedProof = await rawGet({ authorization: sent.get('authorization'), dpop: sent.get('dpop') })
out.asBearer = await rawGet({ authorization: `Bearer ${bound.access_token}` })
out.schemeWithoutProof = await rawGet({ authorization: `DPoP ${bound.access_token}` })

// Refreshing keeps the binding.
const refreshed = await nonceRetry(async () => oauth.processRefreshTokenResponse(as, dpopClient,
  await oauth.refreshTokenGrantRequest(as, dpopClient, clientAuth, bound.refresh_token, { ...insecure, DPoP })))
out.refreshed = { tokenType: refreshed.token_type }

// Introspection, authenticated with private_key_jwt, sees the binding.
const seen = await oauth.processIntrospectionResponse(as, dpopClient,
  await oauth.introspectionRequest(as, dpopClient, clientAuth, refreshed.access_token, insecure))
out.introspection = { active: seen.active, tokenType: seen.token_type, jkt: seen.cnf?.jkt, clientId: seen.client_id }

// Revocation ends the access token at once: the API refuses it, even with a
// fresh proof, and introspection calls it inactive.
await oauth.processRevocationResponse(await oauth.revocationRequest(as, dpopClient, clientAuth, refreshed.access_token, insecure))
try {
  const res = await nonceRetry(async () =>
    oauth.protectedResourceRequest(refreshed.access_token, 'GET', flowsURL, undefined, undefined, { ...insecure, DPoP }))
  out.afterRevocation = { status: res.status }
} catch (err) {
  out.afterRevocation = refusal(err)
}
const after = await oauth.processIntrospectionResponse(as, dpopClient,
  await oauth.introspectionRequest(as, dpopClient, clientAuth, refreshed.access_token, insecure))
out.introspectionAfterRevocation = { active: after.active }

// Revoking the refresh token ends its family.
await oauth.processRevocationResponse(await oauth.revocationRequest(as, dpopClient, clientAuth, refreshed.refresh_token, insecure))
try {
  await nonceRetry(async () => oauth.processRefreshTokenResponse(as, dpopClient,
    await oauth.refreshTokenGrantRequest(as, dpopClient, clientAuth, refreshed.refresh_token, { ...insecure, DPoP })))
  out.refreshAfterRevocation = { error: 'none: a token was issued' }
} catch (err) {
  out.refreshAfterRevocation = refusal(err)
}

process.stdout.write(JSON.stringify(out))

// thumbprint is the RFC 7638 SHA-256 thumbprint of an EC public key,
// computed here so that the test does not take flowd's word for it.
async function thumbprint(publicKey) {
  const { crv, kty, x, y } = await crypto.subtle.exportKey('jwk', publicKey)
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(JSON.stringify({ crv, kty, x, y })))
  return Buffer.from(digest).toString('base64url')
}
