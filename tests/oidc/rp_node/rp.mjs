// openid-client (v6) as a relying party of Tessera, driven step by step by
// tests/oidc/test_oidc_openid_client.py: `node rp.mjs <step> '<json>'` prints one JSON object.
// Steps: start (authorization URL, by PAR and/or a signed request object when asked, with a
// response mode when given and `extra` parameters such as acr_values), finish (code exchange,
// auth_time checked against `maxAge` when given, refresh rotation, reuse refused, revocation; with
// `dpop` every request carries DPoP proofs of one key, with `jarm` the response is a JARM JWT),
// client_credentials (grant, introspection), end_session (RP-initiated logout URL),
// backchannel_logout (validate a received logout token as Back-Channel Logout 1.0 §2.6),
// device_start and device_poll (the device authorization grant, RFC 8628).
import * as client from 'openid-client'
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose'

async function clientAuth (auth) {
  switch (auth.method) {
    case 'client_secret_basic': return client.ClientSecretBasic(auth.secret)
    case 'client_secret_post': return client.ClientSecretPost(auth.secret)
    case 'client_secret_jwt': return client.ClientSecretJwt(auth.secret)
    case 'private_key_jwt': {
      const key = await crypto.subtle.importKey(
        'jwk', auth.privateJwk, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign'])
      return client.PrivateKeyJwt({ key, kid: auth.privateJwk.kid })
    }
    default: throw new Error(`unknown method ${auth.method}`)
  }
}

async function configuration (input) {
  const metadata = { token_endpoint_auth_method: input.auth.method, ...input.metadata }
  if (input.redirectUri) metadata.redirect_uris = [input.redirectUri]
  return client.discovery(new URL(input.issuer), input.clientId, metadata, await clientAuth(input.auth), {
    execute: [client.allowInsecureRequests]
  })
}

function failure (error) {
  return { name: error.name, code: error.code, error: error.error, status: error.status, message: error.message }
}

async function start (input) {
  const config = await configuration(input)
  const verifier = client.randomPKCECodeVerifier()
  const parameters = {
    redirect_uri: input.redirectUri,
    scope: input.scope,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state: client.randomState(),
    nonce: client.randomNonce(),
    ...(input.extra || {})
  }
  if (input.responseMode) parameters.response_mode = input.responseMode
  let url
  if (input.requestObjectJwk) {
    // JAR (RFC 9101): the parameters in a request object signed with the client's ES256 key.
    const key = await crypto.subtle.importKey(
      'jwk', input.requestObjectJwk, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign'])
    const signed = await client.buildAuthorizationUrlWithJAR(config, parameters, { key, kid: input.requestObjectJwk.kid })
    url = input.par ? await client.buildAuthorizationUrlWithPAR(config, signed.searchParams) : signed
  } else {
    url = input.par
      ? await client.buildAuthorizationUrlWithPAR(config, parameters)
      : client.buildAuthorizationUrl(config, parameters)
  }
  return { url: url.href, verifier, state: parameters.state, nonce: parameters.nonce }
}

async function finish (input) {
  const config = await configuration(input)
  if (input.jarm) client.useJwtResponseMode(config)
  const options = input.dpop ? { DPoP: client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256')) } : {}
  const tokens = await client.authorizationCodeGrant(config, new URL(input.callbackUrl), {
    pkceCodeVerifier: input.verifier,
    expectedState: input.state,
    expectedNonce: input.nonce,
    idTokenExpected: true,
    ...(input.maxAge !== undefined ? { maxAge: input.maxAge } : {})
  }, undefined, options)
  const claims = tokens.claims()
  const userinfo = await client.fetchUserInfo(config, tokens.access_token, claims.sub, options)
  const result = {
    scope: tokens.scope,
    tokenType: tokens.token_type,
    claims,
    userinfo,
    idToken: tokens.id_token,
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token
  }
  if (tokens.refresh_token) {
    const rotated = await client.refreshTokenGrant(config, tokens.refresh_token, undefined, options)
    result.rotated = {
      refreshToken: rotated.refresh_token, claims: rotated.claims(), scope: rotated.scope, tokenType: rotated.token_type
    }
    const introspected = await client.tokenIntrospection(config, rotated.refresh_token)
    result.introspected = introspected
    try {
      await client.refreshTokenGrant(config, tokens.refresh_token, undefined, options)
      result.reuse = { accepted: true }
    } catch (error) {
      result.reuse = failure(error)
    }
    try {
      await client.refreshTokenGrant(config, rotated.refresh_token, undefined, options)
      result.afterReuse = { accepted: true }
    } catch (error) {
      result.afterReuse = failure(error)
    }
  }
  return result
}

async function clientCredentials (input) {
  const config = await configuration(input)
  const tokens = await client.clientCredentialsGrant(config, input.scope ? { scope: input.scope } : {})
  const introspected = await client.tokenIntrospection(config, tokens.access_token)
  await client.tokenRevocation(config, tokens.access_token)
  const afterRevocation = await client.tokenIntrospection(config, tokens.access_token)
  return { scope: tokens.scope, tokenType: tokens.token_type, introspected, afterRevocation }
}

async function endSession (input) {
  const config = await configuration(input)
  const url = client.buildEndSessionUrl(config, { id_token_hint: input.idToken })
  return { url: url.href }
}

async function deviceStart (input) {
  const config = await configuration(input)
  const response = await client.initiateDeviceAuthorization(config, { scope: input.scope })
  return { response }
}

async function devicePoll (input) {
  const config = await configuration(input)
  const tokens = await client.pollDeviceAuthorizationGrant(config, input.response)
  const claims = tokens.claims()
  const userinfo = await client.fetchUserInfo(config, tokens.access_token, claims.sub)
  return { scope: tokens.scope, claims, userinfo, refreshToken: tokens.refresh_token }
}

const LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout'

async function backchannelLogout (input) {
  const config = await configuration(input)
  const metadata = config.serverMetadata()
  if (metadata.backchannel_logout_supported !== true) throw new Error('backchannel_logout_supported is not true')
  const keys = createRemoteJWKSet(new URL(metadata.jwks_uri))
  const { payload } = await jwtVerify(input.logoutToken, keys, {
    issuer: metadata.issuer,
    audience: input.clientId,
    typ: 'logout+jwt',
    algorithms: metadata.id_token_signing_alg_values_supported,
    requiredClaims: ['iat', 'jti', 'events'],
    maxTokenAge: '5m'
  })
  if (typeof payload.events !== 'object' || !(LOGOUT_EVENT in payload.events)) throw new Error('no logout event')
  if ('nonce' in payload) throw new Error('a logout token must not carry a nonce')
  if (!payload.sub && !payload.sid) throw new Error('a logout token names sub or sid')
  return { header: decodeProtectedHeader(input.logoutToken), claims: payload }
}

const steps = {
  start,
  finish,
  client_credentials: clientCredentials,
  end_session: endSession,
  backchannel_logout: backchannelLogout,
  device_start: deviceStart,
  device_poll: devicePoll
}
const [step, raw] = process.argv.slice(2)
try {
  const output = await steps[step](JSON.parse(raw))
  process.stdout.write(JSON.stringify({ ok: true, ...output }))
} catch (error) {
  process.stdout.write(JSON.stringify({ ok: false, ...failure(error), cause: error.cause && String(error.cause) }))
}
