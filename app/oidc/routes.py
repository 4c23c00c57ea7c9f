"""HTTP surface of the token side: discovery, JWKS, token, userinfo, revocation, introspection.

The token, revocation and introspection endpoints answer RFC 6749 §5.2 errors
(`{error, error_description}`), not problem+json, because OAuth clients parse them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from flask import Flask, Response, current_app, g, jsonify, request
from flask_limiter.errors import RateLimitExceeded
from flask_smorest import Blueprint
from werkzeug.datastructures import Authorization
from werkzeug.exceptions import RequestEntityTooLarge

from app.errors import BadRequest, NotFound
from app.extensions import limiter
from app.http import UnsupportedMediaType, accepts, is_loopback_client, no_store, problem_doc
from app.oidc import acr, client_auth, dpop, jarm, keys, mail, par, request_objects, service, subjects
from app.oidc.auth import request_urls, require_grant
from app.oidc.claims import SCOPE_CLAIMS, SUPPORTED_SCOPES
from app.oidc.errors import (
    BodyTooLarge,
    InvalidRequest,
    OAuthError,
    UnsupportedBodyType,
    oauth_error_headers,
    oauth_error_response,
)
from app.oidc.schemas import (
    DeviceAuthorizationOut,
    DeviceAuthorizationRequest,
    IntrospectionOut,
    JWKSetOut,
    OAuthErrorOut,
    OutboxArgs,
    OutboxOut,
    PushedAuthorizationOut,
    PushedAuthorizationRequest,
    TokenOut,
    TokenParameter,
    TokenRequest,
    UserInfoOut,
)
from app.oidc.settings import OidcSettings
from app.oidc.text import has_unstorable
from app.settings import current
from app.tenancy.models import Client
from app.web.hot import HotAnswer, HotRequest, counted_before_dispatch, hot, json_answer
from app.web.problem import handle_domain_error, handle_http_exception, rate_limit_retry_after

blp = Blueprint("oidc", __name__, description="OpenID Connect provider: tokens, userinfo, keys")

FORM = "application/x-www-form-urlencoded"
_DISCOVERY_EXTENSIONS = "oidc.discovery_extensions"
JSON = "application/json"
_OAUTH_ENDPOINTS = frozenset(
    {"oidc.token", "oidc.revoke", "oidc.introspect", "oidc.pushed_authorization_request", "oidc.device_authorization"}
)
_OAUTH_ERRORS = {
    str(status): {"description": description, "content": {JSON: {"schema": OAuthErrorOut}}}
    for status, description in (
        (400, "RFC 6749 error"),
        (401, "Client authentication failed"),
        (413, "Body over MAX_CONTENT_LENGTH (error invalid_request)"),
        (415, "Body neither JSON nor a form (error invalid_request)"),
        (429, "Too many requests"),
    )
}


@blp.record_once
def _setup(state) -> None:
    issuer_path = urlsplit(current(OidcSettings, state.app).issuer).path.rstrip("/")
    if issuer_path:
        state.app.add_url_rule(f"{issuer_path}/.well-known/openid-configuration", "oidc_issuer_discovery", discovery)


@blp.errorhandler(OAuthError)
def _handle_oauth_error(error: OAuthError) -> Response:
    return oauth_error_response(error)


@blp.errorhandler(UnsupportedMediaType)
def _handle_unsupported_media_type(error: UnsupportedMediaType) -> Response:
    if request.endpoint not in _OAUTH_ENDPOINTS:
        return handle_domain_error(error)
    return oauth_error_response(UnsupportedBodyType(error.detail))


@blp.errorhandler(RequestEntityTooLarge)
def _handle_too_large(error: RequestEntityTooLarge) -> Response:
    if request.endpoint not in _OAUTH_ENDPOINTS:
        return handle_http_exception(error)
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    return oauth_error_response(
        BodyTooLarge(f"The request body is larger than the limit of {limit} bytes." if limit else "Body too large.")
    )


@blp.errorhandler(RateLimitExceeded)
def _handle_rate_limited(error: RateLimitExceeded) -> Response:
    if request.endpoint not in _OAUTH_ENDPOINTS:
        return handle_http_exception(error)
    response = jsonify({"error": "slow_down", "error_description": "Too many requests; retry later."})
    response.status_code = 429
    response.headers["Retry-After"] = rate_limit_retry_after(error)
    return response


def _parameters() -> dict[str, str]:
    """The body of a token-side request: JSON object or form, as flat strings (read once per request:
    the rate limit's key reads it before the view)."""
    parsed = g.get("oauth_parameters")
    if parsed is not None:
        return parsed
    if request.mimetype == JSON:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            raise InvalidRequest("The body must be a JSON object.")
        values = {key: value for key, value in body.items() if isinstance(value, str)}
    else:
        values = dict(request.form.items())
    if any(has_unstorable(value) for value in values.values()):
        raise InvalidRequest("A parameter holds a NUL byte or an unpaired surrogate.")
    g.oauth_parameters = values
    return values


def _presented_credentials(values: dict[str, str]) -> client_auth.PresentedCredentials:
    """How the request authenticates its client (RFC 6749 §2.3.1 Basic is form-encoded)."""
    auth = request.authorization
    basic = None
    if auth is not None and auth.type == "basic":
        basic = (unquote_plus(auth.username or ""), unquote_plus(auth.password or ""))
    return client_auth.presented_credentials(values, basic)


def _authenticator(values: dict[str, str]) -> client_auth.ClientAuthenticator:
    """Authenticates the request's client when called (each grant calls it before it reads or writes anything else).

    The keys of a `private_key_jwt` client's `jwks_uri` are fetched now, before the unit of work.
    """
    credentials = _presented_credentials(values)
    client_auth.fetch_assertion_keys(credentials)
    audiences: frozenset[str] = frozenset()
    if credentials.method == "assertion":  # only an assertion names an audience
        audiences = frozenset((current(OidcSettings).issuer, *request_urls()))
    return client_auth.ClientAuthenticator(credentials, audiences)


def token_rate_bucket(issuer: str, address: str | None, client: str) -> str:
    """Rate-limit bucket of the named client *from this network address* (per issuer, so
    deployments may share one Redis).

    The client is named before it authenticates, so a bucket per client alone would let anyone
    exhaust a victim client's budget with junk requests; keyed by address too, they only
    exhaust their own.
    """
    return f"oidc-client:{issuer}:{address or 'unknown'}:{client[:32]}"


def _client_rate_key() -> str:
    """The request's bucket of the token-side limit (see `token_rate_bucket`)."""
    auth = request.authorization
    if auth is not None and auth.username:
        client = unquote_plus(auth.username)
    else:
        try:
            client = _parameters().get("client_id") or ""
        except (OAuthError, RequestEntityTooLarge):  # the view answers it; the address's bucket counts it
            client = ""
    return token_rate_bucket(current(OidcSettings).issuer, request.remote_addr, client)


def _token_rate_limit() -> str:
    return current(OidcSettings).token_rate_limit


@blp.route("/v1/openidc/token", methods=["POST"])
@limiter.limit(_token_rate_limit, key_func=_client_rate_key, exempt_when=counted_before_dispatch)
@accepts(JSON, FORM)
@no_store
@blp.doc(
    requestBody={"content": {JSON: {"schema": TokenRequest}, FORM: {"schema": TokenRequest}}}, responses=_OAUTH_ERRORS
)
@blp.response(200, TokenOut)
def token():
    """The token endpoint: `authorization_code`, `refresh_token`, `client_credentials` and device code grants.

    Client authentication by the client's `token_endpoint_auth_method`: `client_secret_basic`,
    `client_secret_post`, or an RFC 7523 `client_assertion` (`client_secret_jwt`, `private_key_jwt`).
    A code is single use: a second exchange answers `invalid_grant` and revokes the tokens of the
    first. Refresh tokens rotate on every use; presenting a used one revokes its whole family.
    With a `DPoP` proof (RFC 9449) the access token is bound to its key (`token_type: DPoP`,
    `cnf.jkt`); a proof without the current nonce answers `use_dpop_nonce` with `DPoP-Nonce`.
    """
    values = _parameters()
    authenticator = _authenticator(values)
    proof = service.token_request_proof(request.headers.getlist("DPoP"), urls=request_urls())
    headers = {"DPoP-Nonce": dpop.current_nonce()} if proof is not None and current(OidcSettings).dpop_nonce else {}
    return service.grant_token(values, authenticator, proof).as_dict(), 200, headers


@hot.route("POST", r"/v1/openidc/token", view="oidc.token", media_type=FORM, max_body=16 * 1024)
def exchange_code_at_once(request: HotRequest) -> HotAnswer | None:
    """The hot path of every login: a code exchange by client secret in a form, counted in the
    view's limit and bucket, redeemed by `service.redeem_code_by_secret` (one statement, its own
    unit of work) and, when refused, explained by `service.explain_refused_code` (read only).
    Other grants, methods and bodies, a limit reached, a replayed code, grants issuing a refresh
    token and requests with a DPoP proof are the view's."""
    exchange = _plain_exchange(request)
    if exchange is None:
        return request.hand_off("not a code exchange by client secret in a plain form")
    settings = current(OidcSettings, request.app)
    if settings.dpop_enabled and request.header("HTTP_DPOP"):
        return request.hand_off("a DPoP proof: the view checks it")
    bucket = token_rate_bucket(settings.issuer, request.header("REMOTE_ADDR"), exchange.credentials.client_id or "")
    if not request.count_limit(settings.token_rate_limit, bucket, "oidc.token"):
        return request.hand_off("the token limit is reached (or its storage failed)")
    redeem = {"code": exchange.values["code"], "redirect_uri": exchange.values["redirect_uri"],
              "code_verifier": exchange.values.get("code_verifier")}  # fmt: skip
    with request.app.app_context():
        if not keys.signing_keys_loaded():
            return request.hand_off("the signing keys are not loaded yet (the view may create them)")
        with request.unit_of_work() as connection:
            answer = service.redeem_code_by_secret(exchange.credentials, connection, **redeem)
        if answer is None:
            refusal = service.explain_refused_code(exchange.credentials, **redeem)
            if refusal is None:
                return request.hand_off("a replay, or a grant the unit of work redeems")
            basic = exchange.credentials.method == "client_secret_basic"
            return json_answer(request.app, refusal.status, refusal.body(), oauth_error_headers(refusal, basic))
        return json_answer(request.app, 200, answer.as_dict(), {"Cache-Control": "no-store", "Pragma": "no-cache"})


@dataclass(frozen=True, slots=True)
class _Exchange:
    values: dict[str, str]
    credentials: client_auth.PresentedCredentials


def _plain_exchange(request: HotRequest) -> _Exchange | None:
    """The parameters and client credentials of a well-formed code exchange by client secret, else None."""
    try:
        pairs = parse_qsl((request.body or b"").decode("ascii"), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        return None
    values = dict(pairs)
    if len(values) != len(pairs) or values.get("grant_type") != "authorization_code":
        return None
    if not values.get("code") or not values.get("redirect_uri"):
        return None
    if any(has_unstorable(value) for value in values.values()):
        return None
    basic = None
    header = request.header("HTTP_AUTHORIZATION")
    if header:
        auth = Authorization.from_header(header)
        if auth is None or auth.type != "basic":
            return None
        basic = (unquote_plus(auth.username or ""), unquote_plus(auth.password or ""))
    try:
        credentials = client_auth.presented_credentials(values, basic)
    except OAuthError:  # mixed methods: the view says so
        return None
    if credentials.method not in client_auth.SECRET_METHODS:
        return None
    return _Exchange(values, credentials)


@blp.route("/v1/openidc/par", methods=["POST"])
@limiter.limit(_token_rate_limit, key_func=_client_rate_key)
@accepts(FORM)
@no_store
@blp.doc(requestBody={"content": {FORM: {"schema": PushedAuthorizationRequest}}}, responses=_OAUTH_ERRORS)
@blp.response(201, PushedAuthorizationOut)
def pushed_authorization_request():
    """Push an authorization request (RFC 9126) and get a single-use, short-lived `request_uri`.

    The browser then goes to the authorization endpoint with only `client_id` and that
    `request_uri`. The client authenticates as at the token endpoint; errors of the request itself
    answer the code the authorization endpoint would have sent to the redirect_uri. A `DPoP` proof
    binds the code to its key, as `dpop_jkt` does (RFC 9449 §10.1).
    """
    values = _parameters()
    request_objects.prefetch_keys(values)
    client = _authenticated_client_for(values)
    proof = service.token_request_proof(request.headers.getlist("DPoP"), urls=request_urls())
    return par.push_request(client, values, proof)


@blp.route("/v1/openidc/device_authorization", methods=["POST"])
@limiter.limit(_token_rate_limit, key_func=_client_rate_key)
@accepts(FORM)
@no_store
@blp.doc(requestBody={"content": {FORM: {"schema": DeviceAuthorizationRequest}}}, responses=_OAUTH_ERRORS)
@blp.response(200, DeviceAuthorizationOut)
@problem_doc(404)
def device_authorization():
    """Start a device authorization (RFC 8628): a device code to poll the token endpoint with
    (`grant_type=urn:ietf:params:oauth:grant-type:device_code`) and a user code for the device page.

    The client authenticates as at the token endpoint and must have the device grant in its
    `grant_types`. 404 while the operator turned the device flow off (`OIDC_DEVICE_FLOW`).
    """
    values = _parameters()
    return service.start_device_authorization(_authenticator(values), values.get("scope"))


@blp.route("/v1/openidc/user", methods=["GET", "POST"])
@accepts(FORM)
@no_store
@blp.doc(security=[{"BearerToken": []}])
@blp.response(200, UserInfoOut)
@problem_doc(401, 403)
def userinfo():
    """OpenID userinfo of the token's user: `sub`, `user_id`, `did` and the claims its scopes release.

    With the `app_claims` scope, also the client's application claims (its `id_token_claims`
    mapping, e.g. `edu_username`), as long as the user consented to the mapping as it is now.
    A client that registered `userinfo_signed_response_alg` gets the document as a JWT signed with
    it (`application/jwt`, with `iss` and `aud`). The token may be DPoP-bound (`Authorization: DPoP`).
    """
    # A Response passes through the schema untouched: application claims are not known to it.
    _claims, grant = require_grant("openid")
    signed = service.signed_userinfo(grant)
    if signed is not None:
        return Response(signed, mimetype="application/jwt")
    return jsonify(service.userinfo(grant))


def _authenticated_client_for(values: dict[str, str]) -> Client:
    return _authenticator(values)()


@blp.route("/v1/openidc/revoke", methods=["POST"])
@limiter.limit(_token_rate_limit, key_func=_client_rate_key)
@accepts(FORM, JSON)
@no_store
@blp.doc(requestBody={"content": {FORM: {"schema": TokenParameter}}}, responses=_OAUTH_ERRORS)
@blp.response(200)
def revoke():
    """RFC 7009 token revocation for the client the token was issued to (always 200 once authenticated)."""
    values = _parameters()
    client = _authenticated_client_for(values)
    service.revoke_token(client, values.get("token"))
    return ""


@blp.route("/v1/openidc/introspect", methods=["POST"])
@limiter.limit(_token_rate_limit, key_func=_client_rate_key)
@accepts(FORM, JSON)
@no_store
@blp.doc(requestBody={"content": {FORM: {"schema": TokenParameter}}}, responses=_OAUTH_ERRORS)
@blp.response(200, IntrospectionOut)
def introspect():
    """RFC 7662 token introspection, for the client the token was issued to."""
    values = _parameters()
    client = _authenticated_client_for(values)
    return service.introspect_token(client, values.get("token"))


@blp.route("/certs/jwks.json", methods=["GET"])
@blp.response(200, JWKSetOut)
def jwks():
    """The public keys that verify issued tokens: active, next, and retired ones still in use."""
    return keys.published_jwks(), 200, {"Cache-Control": "public, max-age=300"}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@blp.route("/.well-known/openid-configuration", methods=["GET"])
@blp.response(200)
def discovery():
    """OpenID Provider metadata (OpenID Connect Discovery 1.0)."""
    settings = current(OidcSettings)
    issuer = settings.issuer
    base = _origin(issuer)
    claims = sorted(
        {"sub", "user_id", "did", "iss", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "sid"}
        | {claim for names in SCOPE_CLAIMS.values() for claim in names}
    )
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{base}/v1/openidc/authorize",
        "token_endpoint": f"{base}/v1/openidc/token",
        "userinfo_endpoint": f"{base}/v1/openidc/user",
        "jwks_uri": f"{base}/certs/jwks.json",
        "end_session_endpoint": f"{base}/v1/openidc/logout",
        "revocation_endpoint": f"{base}/v1/openidc/revoke",
        "pushed_authorization_request_endpoint": f"{base}/v1/openidc/par",
        "require_pushed_authorization_requests": False,
        "introspection_endpoint": f"{base}/v1/openidc/introspect",
        "scopes_supported": list(SUPPORTED_SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": list(jarm.response_modes()),
        "grant_types_supported": list(service.supported_grant_types()),
        "subject_types_supported": subjects.subject_types_supported(),
        "id_token_signing_alg_values_supported": list(keys.ALGORITHMS),
        "token_endpoint_auth_methods_supported": list(client_auth.METHODS),
        "token_endpoint_auth_signing_alg_values_supported": ["HS256", *client_auth.KEY_ALGORITHMS],
        "revocation_endpoint_auth_methods_supported": list(client_auth.METHODS),
        "revocation_endpoint_auth_signing_alg_values_supported": ["HS256", *client_auth.KEY_ALGORITHMS],
        "introspection_endpoint_auth_methods_supported": list(client_auth.METHODS),
        "introspection_endpoint_auth_signing_alg_values_supported": ["HS256", *client_auth.KEY_ALGORITHMS],
        "code_challenge_methods_supported": ["S256"],
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        "claims_supported": claims,
        "claims_parameter_supported": settings.claims_parameter,
        "acr_values_supported": list(acr.ACR_VALUES),
        "backchannel_logout_supported": True,
        "backchannel_logout_session_supported": True,
        "request_parameter_supported": settings.request_objects,
        # Only the request_uri of a pushed request (PAR) is accepted, never one to fetch.
        "request_uri_parameter_supported": False,
        "authorization_response_iss_parameter_supported": True,
        "ui_locales_supported": ["en"],
    }
    if settings.request_objects:
        document["request_object_signing_alg_values_supported"] = list(request_objects.ALGORITHMS)
        document["require_signed_request_object"] = False
    if settings.device_flow:
        document["device_authorization_endpoint"] = f"{base}/v1/openidc/device_authorization"
    for build in current_app.extensions.get(_DISCOVERY_EXTENSIONS, ()):
        document.update(build(base))
    if settings.dpop_enabled:
        document["dpop_signing_alg_values_supported"] = list(dpop.PROOF_ALGORITHMS)
    if settings.signed_userinfo_enabled:
        document["userinfo_signing_alg_values_supported"] = list(keys.ALGORITHMS)
    if settings.jarm_enabled:
        document["authorization_signing_alg_values_supported"] = list(keys.ALGORITHMS)
    return document, 200, {"Cache-Control": "public, max-age=300"}


def add_discovery_metadata(app: Flask, build: Callable[[str], dict]) -> None:
    """Let a feature built on the provider add members to the discovery document: `build(origin)`
    answers them (none while the feature is off), given the issuer's origin."""
    app.extensions.setdefault(_DISCOVERY_EXTENSIONS, []).append(build)


@blp.route("/dev/outbox", methods=["GET"])
@blp.arguments(OutboxArgs, location="query")
@blp.response(200, OutboxOut)
@problem_doc(400, 404)
def dev_outbox(args: dict):
    """Mail kept by the outbox backend, newest first (only when `DEV_OUTBOX=1`, never in production, and to
    loopback clients only: the Procfile's web server listens on every interface)."""
    if not current_app.config["DEV_OUTBOX"]:
        raise NotFound("The development outbox is disabled.")
    if not is_loopback_client(request.remote_addr):
        raise NotFound("The development outbox is served to loopback clients only.")
    if not args.get("to"):
        raise BadRequest("Name the recipient: /dev/outbox?to=<address>.")
    return {"data": mail.outbox_messages(args.get("to"))}
