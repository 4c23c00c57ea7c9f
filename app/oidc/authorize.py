"""Use cases of the authorization endpoint: validate the request, sign in by e-mail code, single
sign-on, consent, and the one-time code. Functions flush but never commit.

A request in progress lives in `AuthorizationRequest`, reached through a random handle carried by
the pages and bound to the browser that started it (the hash of its browser cookie), so a handle
leaked from one browser cannot be completed in another.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import formataddr
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sqlalchemy import delete, select, update
from sqlalchemy.orm.attributes import set_committed_value

import app.json_text as json_text
from app.db import as_utc, utcnow
from app.extensions import db
from app.oidc import acr, device, dpop, grants, jarm, recaptcha, request_objects, subjects, tokens
from app.oidc.backchannel import queue_logouts, remember_session_client
from app.oidc.claims import ClaimsRequestInvalid, RequestedClaims, parse_claims_request, parse_scope
from app.oidc.errors import AuthorizationPageError, AuthorizationRedirectError
from app.oidc.limits import count_hit
from app.oidc.mail import send_mail
from app.oidc.models import (
    AccountSignIn,
    AuthorizationCode,
    AuthorizationRequest,
    ClientAssertion,
    DeviceAuthorization,
    LoginCodeCounter,
    LoginSession,
    PushedRequest,
    RefreshToken,
    RevokedToken,
    SessionClient,
)
from app.oidc.service import get_relying_party, revoke_session_refresh_tokens, revoke_user_refresh_tokens
from app.oidc.settings import OidcSettings
from app.oidc.text import has_unstorable
from app.passkeys import service as passkey_service
from app.passkeys.errors import PasskeyRefused
from app.security import hash_secret, random_token, texts_equal
from app.settings import current
from app.social import sign_in as social_sign_in
from app.tenancy.models import DEFAULT_SIGN_IN_POLICY, Client
from app.tenancy.service import from_email_address, privacy_reference
from app.users.models import User
from app.users.service import find_user_by_email, get_enabled_user_in_tree

PROMPTS = frozenset({"none", "login", "consent", "select_account"})
ACCOUNT_PAGE = "/v1/openidc/account"
ACCOUNT_SIGN_IN_PAGE = "/v1/openidc/account/sign-in"
_KNOWN_PARAMETERS = frozenset(
    {
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "nonce",
        "prompt",
        "max_age",
        "login_hint",
        "code_challenge",
        "code_challenge_method",
        "response_mode",
        "request",
        "request_uri",
        "acr_values",
        "claims",
        "dpop_jkt",
    }
)
_CODE_CHALLENGE = re.compile(r"[A-Za-z0-9._~-]{43,128}")
# An RFC 7638 SHA-256 thumbprint, base64url without padding.
_JKT = re.compile(r"[A-Za-z0-9_-]{43}")
# No whitespace, control characters (NUL cannot be stored) or lone surrogates anywhere.
_EMAIL_CHAR = r"[^@\s\x00-\x1f\x7f\ud800-\udfff]"
_EMAIL = re.compile(rf"{_EMAIL_CHAR}{{1,64}}@{_EMAIL_CHAR}{{1,253}}\.{_EMAIL_CHAR}{{1,63}}")
_MAX_STATE = 2048
_MAX_ACR_VALUES = 512
# The request row keeps max_age in a 32-bit column.
MAX_AGE_LIMIT = 2**31 - 1
_RESTART = "Too many wrong codes. Go back to the application and start again."
_PASSKEY_RESTART = "Too many sign-in attempts. Go back to the application and start again."
_NOT_THE_NAMED_USER = "The user signed in is not the one the request names (claims sub)."
# Any passkey with user verification: what adding one to a sign-in contributes to its level.
_A_PASSKEY = ("hwk", "user")


@dataclass(frozen=True)
class AuthorizationParams:
    """A validated authorization request."""

    client: Client
    redirect_uri: str
    scopes: tuple[str, ...]
    state: str | None = None
    nonce: str | None = None
    code_challenge: str | None = None
    prompt: frozenset[str] = field(default_factory=frozenset)
    max_age: int | None = None
    login_hint: str | None = None
    acr_values: tuple[str, ...] = ()
    acr_essential: bool = False
    claims: RequestedClaims = grants.NO_CLAIMS
    # Set when the sign-in approves a device authorization (RFC 8628) rather than issuing a code.
    device_authorization_id: int | None = None
    response_mode: str | None = None
    dpop_jkt: str | None = None


@dataclass(frozen=True)
class Outcome:
    """Where the browser goes next: the client's redirect_uri, or one of our pages with a handle."""

    redirect_to: str | None = None
    page: str | None = None
    handle: str | None = None
    session_token: str | None = None


@dataclass(frozen=True)
class LoginStep:
    """The result of submitting the e-mail or the code form when the flow is not finished yet."""

    request: AuthorizationRequest
    client: Client
    message: str | None = None
    error: bool = False
    status: int = 400


def browser_hash(browser_token: str) -> str:
    return hash_secret("browser:" + browser_token)


def validate_redirect_target(raw: Mapping[str, str]) -> tuple[Client, str]:
    """The client and redirect_uri, both trusted; AuthorizationPageError (never a redirect) otherwise."""
    client = get_relying_party(raw.get("client_id"))
    if client is None:
        raise AuthorizationPageError(
            "This application is not known to us, so we cannot sign you in to it.",
            code="invalid_client",
            detail="client_id is missing or names no active client.",
        )
    redirect_uri = raw.get("redirect_uri") or ""
    if not redirect_uri or redirect_uri not in (client.redirect_uris or []):
        raise AuthorizationPageError(
            "The application asked us to send you to an address it has not registered, so we stopped here.",
            detail="redirect_uri is missing."
            if not redirect_uri
            else "redirect_uri is not registered for this client (it must equal one registered URI exactly).",
        )
    return client, redirect_uri


def validate_authorization_request(
    raw: Mapping[str, str], repeated: frozenset[str] = frozenset(), *, pushed: bool = False, signed: bool = False
) -> AuthorizationParams:
    """Check every parameter; redirect-safe errors raise AuthorizationRedirectError (RFC 6749 §4.1.2.1).

    `repeated` names parameters sent more than once, which RFC 6749 §3.1 forbids. `pushed` says
    the parameters came from a pushed request (PAR), which some clients require; `signed` that
    they came in a request object already verified (a pushed one). A `request` object among
    `raw` is verified and its parameters win (`request_objects`).
    """
    if repeated & {"client_id", "redirect_uri"}:
        raise AuthorizationPageError(
            "The application sent an ambiguous request, so we stopped here.",
            detail=f"{' and '.join(sorted(repeated & {'client_id', 'redirect_uri'}))} sent more than once.",
        )
    if raw.get("request") and request_objects.enabled() and "request" not in repeated:
        raw, signed = _with_request_object(raw), True
    client, redirect_uri = validate_redirect_target(raw)
    try:
        if client.require_pushed_authorization_requests and not pushed:
            raise AuthorizationRedirectError("invalid_request", "This client must use pushed authorization requests.")
        if client.require_signed_request_object and not signed:
            raise AuthorizationRedirectError("invalid_request", "This client must send a signed request object.")
        return _validated_parameters(raw, repeated, client, redirect_uri)
    except AuthorizationRedirectError as error:
        raise _redirected(error, raw, redirect_uri, client) from None


def _redirected(
    error: AuthorizationRedirectError, raw: Mapping[str, str], redirect_uri: str, client: Client
) -> AuthorizationRedirectError:
    """`error` with its location: the trusted `redirect_uri` carrying the error, the state and the
    issuer, as a JARM response when the request asked for one (`authorization_response`)."""
    state = raw.get("state")
    mode = raw.get("response_mode")
    location = authorization_response(
        client,
        redirect_uri,
        mode if mode in jarm.response_modes() else None,
        {
            "error": error.error,
            "error_description": error.description,
            "state": None if has_unstorable(state) else state,
            "iss": tokens.issuer(),
        },
    )
    return AuthorizationRedirectError(error.error, error.description, location=location)


def _with_request_object(raw: Mapping[str, str]) -> dict[str, str]:
    """`raw` with the parameters of its verified request object; a refusal goes back to the
    redirect_uri sent beside the object when it is registered, else to an error page."""
    client = get_relying_party(raw.get("client_id"))
    if client is None:
        validate_redirect_target(raw)  # the unknown-client page
    try:
        return request_objects.merged_parameters(raw, client)
    except request_objects.RequestObjectRefused as error:
        refused = AuthorizationRedirectError("invalid_request_object", str(error))
        redirect_uri = raw.get("redirect_uri") or ""
        if redirect_uri not in (client.redirect_uris or []):
            raise AuthorizationPageError(
                "The application sent a request we could not verify, so we stopped here.",
                code="invalid_request_object",
                detail=str(error),
            ) from None
        raise _redirected(refused, raw, redirect_uri, client) from None


def _validated_parameters(
    raw: Mapping[str, str], repeated: frozenset[str], client: Client, redirect_uri: str
) -> AuthorizationParams:
    for name, value in raw.items():
        if name != "login_hint" and has_unstorable(value):
            named = name if name in _KNOWN_PARAMETERS else "A parameter"
            raise AuthorizationRedirectError("invalid_request", f"{named} holds a NUL byte or an unpaired surrogate.")
    if repeated:
        raise AuthorizationRedirectError("invalid_request", f"Repeated parameter: {sorted(repeated)[0]}.")
    if raw.get("request"):
        raise AuthorizationRedirectError("request_not_supported", "Request objects are not supported.")
    if raw.get("request_uri"):
        raise AuthorizationRedirectError("invalid_request", "request_uri is only accepted from /par.")
    if not raw.get("response_type"):
        raise AuthorizationRedirectError("invalid_request", "response_type is required.")
    if raw.get("response_type") != "code":
        raise AuthorizationRedirectError("unsupported_response_type", "Only response_type=code is supported.")
    modes = jarm.response_modes()
    if raw.get("response_mode") not in (None, "", *modes):
        raise AuthorizationRedirectError("invalid_request", f"response_mode must be one of {', '.join(modes)}.")
    scopes = parse_scope(raw.get("scope"))
    if "openid" not in scopes:
        raise AuthorizationRedirectError("invalid_scope", "The scope must include openid.")
    prompt = frozenset((raw.get("prompt") or "").split())
    if not prompt <= PROMPTS or ("none" in prompt and len(prompt) > 1):
        raise AuthorizationRedirectError("invalid_request", "prompt has an unsupported value.")
    max_age = None
    if raw.get("max_age") not in (None, ""):
        text = str(raw["max_age"])
        if not (text.isascii() and text.isdigit()):
            raise AuthorizationRedirectError("invalid_request", "max_age must be a non-negative integer.")
        if len(text) > len(str(MAX_AGE_LIMIT)) or int(text) > MAX_AGE_LIMIT:
            raise AuthorizationRedirectError("invalid_request", f"max_age must be at most {MAX_AGE_LIMIT} seconds.")
        max_age = int(text)
    challenge = raw.get("code_challenge") or None
    method = raw.get("code_challenge_method") or None
    if challenge is not None:
        if (method or "plain") != "S256":
            raise AuthorizationRedirectError("invalid_request", "Only code_challenge_method=S256 is supported.")
        if not _CODE_CHALLENGE.fullmatch(challenge):
            raise AuthorizationRedirectError("invalid_request", "code_challenge is malformed.")
    elif method is not None:
        raise AuthorizationRedirectError("invalid_request", "code_challenge_method without code_challenge.")
    elif client.require_pkce:
        raise AuthorizationRedirectError("invalid_request", "This client must use PKCE: code_challenge is required.")
    dpop_jkt = (raw.get("dpop_jkt") or None) if dpop.enabled() else None
    if dpop_jkt is not None and not _JKT.fullmatch(dpop_jkt):
        raise AuthorizationRedirectError("invalid_request", "dpop_jkt must be a SHA-256 JWK thumbprint (RFC 7638).")
    state, nonce = raw.get("state") or None, raw.get("nonce") or None
    if (state and len(state) > _MAX_STATE) or (nonce and len(nonce) > _MAX_STATE):
        raise AuthorizationRedirectError("invalid_request", "state or nonce is too long.")
    # A hint is only a convenience: one we could not store is dropped rather than refused.
    hint = raw.get("login_hint") or ""
    login_hint = None if has_unstorable(hint) else hint.strip()[:254] or None
    claims_parameter = raw.get("claims") if current(OidcSettings).claims_parameter else None
    acr_values, acr_essential = _requested_acr(raw.get("acr_values"), claims_parameter)
    try:
        requested_claims = parse_claims_request(claims_parameter) if claims_parameter else grants.NO_CLAIMS
    except ClaimsRequestInvalid as error:
        raise AuthorizationRedirectError("invalid_request", str(error)) from None
    if acr.target(sign_in_policy(client), acr_values, acr_essential) is None:
        raise AuthorizationRedirectError(
            "unmet_authentication_requirements", "The essential acr cannot be met by this application's sign-in."
        )
    return AuthorizationParams(
        client=client,
        redirect_uri=redirect_uri,
        scopes=tuple(scopes),
        state=state,
        nonce=nonce,
        code_challenge=challenge,
        prompt=prompt,
        max_age=max_age,
        login_hint=login_hint,
        acr_values=acr_values,
        acr_essential=acr_essential,
        claims=requested_claims,
        response_mode=raw.get("response_mode") or None,
        dpop_jkt=dpop_jkt,
    )


def _requested_acr(acr_values: str | None, claims_parameter: str | None) -> tuple[tuple[str, ...], bool]:
    """The acr values asked for, in order of preference, and whether one of them is essential.

    The `claims` parameter's id_token `acr` (OpenID Connect Core 5.5.1.1, its `value` or `values`)
    wins over `acr_values`.
    """
    values = tuple(dict.fromkeys((acr_values or "").split()))
    if len(" ".join(values)) > _MAX_ACR_VALUES:
        raise AuthorizationRedirectError("invalid_request", "acr_values is too long.")
    if not claims_parameter:
        return values, False
    try:
        claims = json_text.loads(claims_parameter, "claims")
    except ValueError:
        raise AuthorizationRedirectError("invalid_request", "claims is not a JSON object.") from None
    if not isinstance(claims, dict) or not isinstance(claims.get("id_token", {}), dict):
        raise AuthorizationRedirectError("invalid_request", "claims is not a JSON object of objects.")
    asked = (claims.get("id_token") or {}).get("acr")
    if asked is None:
        return values, False
    if not isinstance(asked, dict):
        raise AuthorizationRedirectError("invalid_request", "claims.id_token.acr must be an object or null.")
    named = [asked["value"]] if "value" in asked else asked.get("values", [])
    if not isinstance(named, list) or not all(isinstance(value, str) for value in named):
        raise AuthorizationRedirectError("invalid_request", "claims.id_token.acr values must be strings.")
    named = tuple(dict.fromkeys(named))
    if len(" ".join(named)) > _MAX_ACR_VALUES:
        raise AuthorizationRedirectError("invalid_request", "claims.id_token.acr has too many values.")
    if not named:
        return values, False
    return named, asked.get("essential") is True


def sign_in_policy(client: Client) -> str:
    """The sign-in policy of the client's tree: its master client's."""
    root = client if client.root_id is None else db.session.get(Client, client.root_id)
    return root.sign_in_policy if root is not None and root.sign_in_policy else DEFAULT_SIGN_IN_POLICY


def request_target(request: AuthorizationRequest, client: Client) -> acr.Target:
    """What the sign-in of `request` must and should reach under its tree's policy."""
    found = acr.target(sign_in_policy(client), _acr_values(request), request.acr_essential)
    return found or acr.Target(wanted=3, required=4)


def _acr_values(request: AuthorizationRequest) -> tuple[str, ...]:
    return tuple((request.acr_values or "").split())


def redirect_uri_with(redirect_uri: str, params: Mapping[str, str | None]) -> str:
    """`redirect_uri` with `params` added to its query (keeping what it already has)."""
    parts = urlsplit(redirect_uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query.extend((key, value) for key, value in params.items() if value is not None)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def authorization_response(
    client: Client, redirect_uri: str, mode: str | None, params: Mapping[str, str | None]
) -> str:
    """The redirect carrying an authorization response (a code, or an error) to `client`: `params`
    in the query, or with a JARM `mode` one JWT of them (`app.oidc.jarm`) in the query or fragment."""
    values = {key: value for key, value in params.items() if value is not None}
    placement = jarm.placement(mode)
    if placement is None:
        return redirect_uri_with(redirect_uri, values)
    response = jarm.sign_response(client, values)
    if placement == jarm.QUERY:
        return redirect_uri_with(redirect_uri, {"response": response})
    parts = urlsplit(redirect_uri)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, urlencode({"response": response})))


def error_redirect(params_or_request: AuthorizationParams | AuthorizationRequest, error: str, description: str) -> str:
    """The error response to the request's redirect_uri, in its response mode."""
    state = getattr(params_or_request, "state", None) or getattr(params_or_request, "rp_state", None)
    if isinstance(params_or_request, AuthorizationParams):
        client = params_or_request.client
    else:
        client = db.session.get(Client, params_or_request.client_id)
    return authorization_response(
        client,
        params_or_request.redirect_uri,
        params_or_request.response_mode,
        {
            "error": error,
            "error_description": description,
            "state": state,
            "iss": tokens.issuer(),
        },
    )


def find_live_session(session_token: str | None) -> LoginSession | None:
    """The unexpired, not ended single sign-on session behind this browser's cookie, if any."""
    if not session_token:
        return None
    session = db.session.execute(
        select(LoginSession).where(LoginSession.token_hash == hash_secret("sso:" + session_token))
    ).scalar_one_or_none()
    if session is None or session.ended_at is not None or as_utc(session.expires_at) <= utcnow():
        return None
    return session


def find_session(session_token: str | None, root_client_id: int) -> LoginSession | None:
    """The live single sign-on session of this browser for the client tree, if any."""
    session = find_live_session(session_token)
    if session is None or session.root_client_id != root_client_id:
        return None
    return session


def _root_id(client: Client) -> int:
    return client.root_id or client.id


def _new_request(params: AuthorizationParams, browser_token: str, **fields) -> tuple[AuthorizationRequest, str]:
    handle = random_token(32)
    now = utcnow()
    request = AuthorizationRequest(
        handle_hash=hash_secret("authz:" + handle),
        browser_hash=browser_hash(browser_token),
        client_id=params.client.id,
        redirect_uri=params.redirect_uri,
        scope=" ".join(params.scopes),
        rp_state=params.state,
        nonce=params.nonce,
        code_challenge=params.code_challenge,
        prompt=" ".join(sorted(params.prompt)),
        max_age=params.max_age,
        login_hint=params.login_hint,
        acr_values=" ".join(params.acr_values) or None,
        acr_essential=params.acr_essential,
        claims=params.claims.to_json(),
        device_authorization_id=params.device_authorization_id,
        response_mode=params.response_mode,
        dpop_jkt=params.dpop_jkt,
        created_at=now,
        expires_at=now + timedelta(seconds=current(OidcSettings).auth_request_ttl),
        **fields,
    )
    db.session.add(request)
    db.session.flush()
    return request, handle


def account_request(root: Client, browser_hash_: str, email: str | None) -> tuple[AuthorizationRequest, str]:
    """A new authorization request of the tree rooted at `root` that signs its browser in to the
    account page (`for_account`), and its handle; the caller passes its first step."""
    handle = random_token(32)
    now = utcnow()
    request = AuthorizationRequest(
        handle_hash=hash_secret("authz:" + handle),
        browser_hash=browser_hash_,
        client_id=root.id,
        redirect_uri=ACCOUNT_PAGE,
        scope="openid",
        email=email,
        for_account=True,
        created_at=now,
        expires_at=now + timedelta(seconds=current(OidcSettings).auth_request_ttl),
    )
    db.session.add(request)
    db.session.flush()
    return request, handle


def _issue_code(
    *,
    client: Client,
    user_id: int,
    redirect_uri: str,
    scope: str,
    nonce: str | None,
    code_challenge: str | None,
    auth_time: datetime,
    state: str | None,
    sid: str | None,
    amr: str,
    acr_claim: str | None,
    claims: str | None,
    response_mode: str | None,
    dpop_jkt: str | None,
) -> str:
    code = random_token(32)
    now = utcnow()
    if sid is not None:
        remember_session_client(sid, client.id, user_id)
    db.session.add(
        AuthorizationCode(
            code_hash=hash_secret(code),
            client_id=client.id,
            user_id=user_id,
            redirect_uri=redirect_uri,
            scope=scope,
            nonce=nonce,
            code_challenge=code_challenge,
            auth_time=auth_time,
            created_at=now,
            expires_at=now + timedelta(seconds=current(OidcSettings).code_ttl),
            sid=sid,
            amr=amr,
            acr=acr_claim,
            claims=claims,
            dpop_jkt=dpop_jkt,
        )
    )
    db.session.flush()
    return authorization_response(
        client, redirect_uri, response_mode, {"code": code, "state": state, "iss": tokens.issuer()}
    )


def start_authorization(params: AuthorizationParams, *, browser_token: str, session_token: str | None) -> Outcome:
    """Decide the first step: straight back with a code (SSO), the login page, or the consent page."""
    client = params.client
    session = find_session(session_token, _root_id(client))
    user = get_enabled_user_in_tree(session.user_id, _root_id(client)) if session is not None else None
    now = utcnow()
    # OpenID Connect Core 5.5.1: a request naming a `sub` is answered only for that user.
    another_user = user is not None and not params.claims.admits(subjects.subject_for(client, user.id))
    login_needed = (
        user is None
        or another_user
        or "login" in params.prompt
        or (params.max_age is not None and (now - as_utc(session.auth_time)).total_seconds() > params.max_age)
    )
    policy = sign_in_policy(client)
    goal = acr.target(policy, params.acr_values, params.acr_essential)
    assert goal is not None  # an unreachable essential acr was refused by the validation
    amr = session_amr(session)
    # prompt=none accepts a session that reaches what is required; otherwise it must reach what is wanted.
    enough = goal.required if "none" in params.prompt else goal.wanted
    if not login_needed and acr.level_of(amr) < enough:
        if "none" in params.prompt:
            return Outcome(
                redirect_to=error_redirect(params, "login_required", "The session does not meet the acr asked for.")
            )
        if acr.passkeys_allowed(policy) and acr.level_of(acr.combine(amr, _A_PASSKEY)) >= enough:
            # Step up: the signed-in user confirms with a passkey, on top of how they signed in.
            _, handle = _new_request(params, browser_token, candidate_user_id=user.id, amr=amr, sid=session.sid)
            return Outcome(page="passkey", handle=handle)
        login_needed = True
    if login_needed:
        if "none" in params.prompt:
            not_signed_in = _NOT_THE_NAMED_USER if another_user else "The user is not signed in."
            return Outcome(redirect_to=error_redirect(params, "login_required", not_signed_in))
        _, handle = _new_request(params, browser_token)
        return Outcome(page="login", handle=handle)
    assert session is not None and user is not None
    if "consent" in params.prompt or not grants.consent_covers(user.id, client, params.scopes, params.claims):
        if "none" in params.prompt:
            return Outcome(redirect_to=error_redirect(params, "consent_required", "The user has not consented."))
        _, handle = _new_request(
            params, browser_token, user_id=user.id, auth_time=session.auth_time, sid=session.sid, amr=amr
        )
        return Outcome(page="consent", handle=handle)
    return Outcome(
        redirect_to=_issue_code(
            client=client,
            user_id=user.id,
            redirect_uri=params.redirect_uri,
            scope=" ".join(params.scopes),
            nonce=params.nonce,
            code_challenge=params.code_challenge,
            auth_time=as_utc(session.auth_time),
            state=params.state,
            sid=session.sid,
            amr=amr,
            acr_claim=acr.claimed_acr(amr, params.acr_values),
            claims=params.claims.to_json(),
            response_mode=params.response_mode,
            dpop_jkt=params.dpop_jkt,
        )
    )


def start_device_sign_in(
    user_code: str | None, *, remote_addr: str | None, browser_token: str, session_token: str | None
) -> Outcome:
    """The device page's code entered: the sign-in of the code flow for the device authorization it
    names, always through the consent page (the user confirms what the device gets, RFC 8628 §5.4).

    Raises `device.UserCodeRefused` (the attempt counts: the caller commits it) and
    AuthorizationPageError when the device's client was disabled since.
    """
    found = device.require_pending(user_code, remote_addr)
    client = get_relying_party(str(found.client_id))
    if client is None:
        raise AuthorizationPageError(
            "This application is no longer available.", code="invalid_client", detail="The client was disabled."
        )
    params = AuthorizationParams(
        client=client,
        redirect_uri=device.done_uri(),
        scopes=tuple(found.scope.split()),
        prompt=frozenset({"consent"}),
        device_authorization_id=found.id,
    )
    return start_authorization(params, browser_token=browser_token, session_token=session_token)


def session_amr(session: LoginSession | None) -> str:
    """How the session's user signed in (sessions from before methods were recorded: the e-mail code)."""
    if session is None:
        return ""
    return session.amr or acr.LEGACY_AMR


def require_request(handle: str | None, browser_token: str | None) -> tuple[AuthorizationRequest, Client]:
    """The request in progress behind `handle` in this browser; an error page if gone or foreign."""
    expired = AuthorizationPageError(
        "This sign-in page has expired. Go back to the application and start again.",
        status=400,
        code="request_expired",
        detail="The request handle is unknown, expired, or was started in another browser.",
    )
    if not handle or not browser_token:
        raise expired
    request = db.session.execute(
        select(AuthorizationRequest).where(AuthorizationRequest.handle_hash == hash_secret("authz:" + handle))
    ).scalar_one_or_none()
    if request is None or as_utc(request.expires_at) <= utcnow():
        raise expired
    if not secrets.compare_digest(request.browser_hash, browser_hash(browser_token)):
        raise expired
    client = get_relying_party(str(request.client_id))
    if client is None:
        raise AuthorizationPageError(
            "This application is no longer available.", code="invalid_client", detail="The client was disabled."
        )
    return request, client


def send_login_code(
    request: AuthorizationRequest, client: Client, email: str, *, recaptcha_token: str | None, remote_ip: str | None
) -> LoginStep:
    """Mail a fresh 6-digit code to `email` if it has an account in the client's tree.

    The answer is the same whether or not the account exists. A new code replaces the previous
    one but keeps the request's attempt counter. At most `OIDC_LOGIN_CODE_SENDS` codes per
    request and `OIDC_LOGIN_CODE_SENDS_PER_ADDRESS` per address in an hour that opens at its
    first code (counted in the database, so every process shares the limits); beyond them, and
    once the request's attempts are used up, a LoginStep with status 429.
    """
    address = login_address(email)
    if address is None:
        return LoginStep(request, client, "Enter a valid e-mail address.", error=True)
    if request.login_code_attempts >= current(OidcSettings).login_code_attempts:
        return LoginStep(request, client, _RESTART, error=True, status=429)
    if client.recaptcha_enabled and not recaptcha.recaptcha_passes(client, recaptcha_token, remote_ip):
        return LoginStep(request, client, "We could not confirm you are not a robot. Please try again.", error=True)
    refused_send = count_code_send(request, address)
    if refused_send is not None:
        return LoginStep(request, client, refused_send, error=True, status=429)
    user = find_user_by_email(_root_id(client), address)
    if user is not None and user.disabled_at is not None:
        user = None  # answered as an unknown address: no code is mailed, so sign-in cannot finish
    code = new_login_code()
    request.email = address
    if request.candidate_user_id != (user.id if user is not None else None):
        request.amr = ""  # the methods passed so far were another person's
    request.candidate_user_id = user.id if user is not None else None
    request.login_code_hash = hash_secret(f"login:{request.id}:{code}")
    request.login_code_expires_at = utcnow() + timedelta(seconds=current(OidcSettings).login_code_ttl)
    if user is not None:
        minutes = current(OidcSettings).login_code_ttl // 60
        send_mail(
            to=address,
            sender=_sender(client),
            subject=f"Your sign-in code for {client.name}: {code}",
            text=(
                f"Your code to sign in to {client.name} is {code}.\n\n"
                f"It is valid for {minutes} minutes. If you did not try to sign in, ignore this message.\n"
            ),
        )
    db.session.flush()
    return LoginStep(request, client, f"If an account exists for {address}, we sent a code to it.")


def _sender(client: Client) -> str:
    return formataddr((client.name, from_email_address(client)))


def login_address(email: str | None) -> str | None:
    """The address typed into a sign-in form, lower-cased; None when it is not a valid one."""
    address = (email or "").strip().lower()
    return address if _EMAIL.fullmatch(address) and len(address) <= 254 else None


def new_login_code() -> str:
    return f"{secrets.randbelow(10**6):06d}"


def count_code_send(row: AuthorizationRequest | AccountSignIn, address: str) -> str | None:
    """Count one code sent for this sign-in (`row`) and to `address`; why it may not be sent, or None.

    At most `OIDC_LOGIN_CODE_SENDS` per sign-in and `OIDC_LOGIN_CODE_SENDS_PER_ADDRESS` per address in
    an hour that opens at its first code, counted atomically in the database (every process shares
    them), and for an address whether or not it has an account, so the limit reveals nothing.
    """
    model = type(row)
    sends = db.session.execute(
        update(model)
        .where(model.id == row.id, model.login_code_sends < current(OidcSettings).login_code_sends)
        .values(login_code_sends=model.login_code_sends + 1)
        .returning(model.login_code_sends)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if sends is None:
        return "You asked for too many codes for this sign-in. Start the sign-in again."
    set_committed_value(row, "login_code_sends", sends)
    if count_hit("login-code-address:" + address, 3600) > current(OidcSettings).login_code_sends_per_address:
        return f"Too many codes were sent to {address} recently. Wait an hour and try again."
    return None


def verify_login_code(request: AuthorizationRequest, client: Client, code: str) -> LoginStep | Outcome:
    """Check the submitted code: a LoginStep to show again on failure, the next Outcome on success.

    Every attempt is counted before the code is compared, across every code sent for this request;
    after the last allowed attempt the request can no longer sign in, and after expiry a new code
    must be requested.
    """
    if request.login_code_hash is None or request.login_code_expires_at is None:
        return LoginStep(request, client, "Request a new code to sign in.", error=True)
    if as_utc(request.login_code_expires_at) <= utcnow():
        return LoginStep(request, client, "This code has expired. Request a new code.", error=True)
    limit = current(OidcSettings).login_code_attempts
    if not count_sign_in_attempt(request):
        return LoginStep(request, client, _RESTART, error=True)
    submitted = re.sub(r"\s", "", code or "")
    expected = hash_secret(f"login:{request.id}:{submitted}")
    matches = secrets.compare_digest(expected, request.login_code_hash)
    if not matches or request.candidate_user_id is None or _disabled_user(request.candidate_user_id):
        left = limit - request.login_code_attempts
        message = f"That code is not right. {left} attempt{'s' if left != 1 else ''} left." if left else _RESTART
        return LoginStep(request, client, message, error=True)
    request.login_code_hash = None
    return complete_sign_in(request, client, request.candidate_user_id, (acr.OTP,))


def count_sign_in_attempt(request: AuthorizationRequest | AccountSignIn) -> bool:
    """Count one sign-in attempt (a code, a passkey or a linked account) against the sign-in's
    limit, `OIDC_LOGIN_CODE_ATTEMPTS`; False once used up.

    Counted atomically, so concurrent guesses cannot share one attempt.
    """
    limit = current(OidcSettings).login_code_attempts
    model = type(request)
    attempts = db.session.execute(
        update(model)
        .where(model.id == request.id, model.login_code_attempts < limit)
        .values(login_code_attempts=model.login_code_attempts + 1)
        .returning(model.login_code_attempts)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if attempts is None:
        return False
    set_committed_value(request, "login_code_attempts", attempts)
    return True


def complete_sign_in(request: AuthorizationRequest, client: Client, user_id: int, methods: tuple[str, ...]) -> Outcome:
    """The user passed `methods`: sign the browser in (a new single sign-on session, or the one this
    request began with, now also holding the new methods) and continue the authorization.

    The one end of every sign-in method (e-mail code, passkey, linked account): the session, the
    passkey step a policy asks for, consent and the code all follow from here, and the session is the
    one back-channel logout ends. A sign-in that has not yet reached what its tree's policy accepts
    (the e-mail code where a passkey must follow) opens no session and changes nothing: it lives on
    in the request only, until its next step. A platform account waiting for this user
    (`linked_pending`) is linked once they have signed in.
    """
    now = utcnow()
    # Methods passed earlier in this request count only for the same person.
    earlier = (request.amr or "") if request.candidate_user_id == user_id else ""
    amr = acr.combine(earlier, methods)
    policy = sign_in_policy(client)
    session = _request_session(request, user_id)
    session_token = None
    if session is not None:
        session.amr = acr.combine(session_amr(session), methods)
        session.auth_time = now
        amr = session.amr
    elif not acr.sign_in_complete(policy, amr):
        request.sid = None
    else:
        session_token, sid = random_token(32), random_token(16)
        db.session.add(
            LoginSession(
                sid=sid,
                token_hash=hash_secret("sso:" + session_token),
                user_id=user_id,
                root_client_id=_root_id(client),
                auth_time=now,
                created_at=now,
                expires_at=now + timedelta(seconds=current(OidcSettings).session_ttl),
                amr=amr,
            )
        )
        request.sid = sid
    request.candidate_user_id = user_id
    request.amr = amr
    request.auth_time = now
    if request.linked_pending is not None and acr.sign_in_complete(policy, amr):
        social_sign_in.link_pending(request.linked_pending, user_id, client)
        request.linked_pending = None
    db.session.flush()
    outcome = continue_after_login(request, client)
    return Outcome(
        redirect_to=outcome.redirect_to, page=outcome.page, handle=outcome.handle, session_token=session_token
    )


def _request_session(request: AuthorizationRequest, user_id: int) -> LoginSession | None:
    """The live session this request began with or created, if it is `user_id`'s."""
    if request.sid is None:
        return None
    session = db.session.execute(select(LoginSession).where(LoginSession.sid == request.sid)).scalar_one_or_none()
    if session is None or session.ended_at is not None or as_utc(session.expires_at) <= utcnow():
        return None
    return session if session.user_id == user_id else None


@dataclass(frozen=True)
class PasskeyStep:
    """The passkey step of a sign-in: the ceremony's options, or why the request cannot pass it."""

    options: str | None
    refusal: str | None = None
    # Whether the user may add a passkey on the account page (their sign-in so far is a finished one).
    can_add_passkey: bool = False


def login_passkey_options(request: AuthorizationRequest, client: Client) -> str | None:
    """Options of "Sign in with a passkey" on the login page, when the tree accepts a passkey alone
    and one is enough for this request; None otherwise (the page then offers the e-mail code only).

    Starts a new ceremony: its challenge replaces the request's previous one.
    """
    if not acr.passkey_alone_allowed(sign_in_policy(client)) or request_target(request, client).wanted > 2:
        return None
    options, request.passkey_challenge = passkey_service.authentication_options()
    db.session.flush()
    return options


def passkey_step(request: AuthorizationRequest, client: Client) -> PasskeyStep:
    """The second step of a sign-in whose first one is not enough: the signed-in user's passkey.

    Starts a new ceremony for the user's passkeys; a user without any, or a request whose tree does
    not use passkeys, gets a refusal to show instead.
    """
    if request.candidate_user_id is None or not request.amr:
        raise AuthorizationPageError(
            "Sign in first. Go back to the application and start again.",
            code="login_required",
            detail="The passkey step needs a first sign-in step.",
        )
    policy = sign_in_policy(client)
    if not acr.passkeys_allowed(policy) or not _has_passkey(request.candidate_user_id):
        if acr.sign_in_complete(policy, request.amr):
            return PasskeyStep(
                None,
                f"{client.name} asks for a passkey here, and you have none yet. Add one on your account page, "
                "then go back to the application and sign in again.",
                can_add_passkey=True,
            )
        return PasskeyStep(
            None,
            f"{client.name} requires a passkey after the e-mail code, and you have none yet. A passkey is added "
            f"on your account page, which the e-mail code alone does not open here: ask {client.name} to let you "
            "add one.",
        )
    options, request.passkey_challenge = passkey_service.authentication_options(request.candidate_user_id)
    db.session.flush()
    return PasskeyStep(options)


def _has_passkey(user_id: int | None) -> bool:
    return user_id is not None and passkey_service.count_passkeys(user_id) > 0


def take_passkey_challenge(request: AuthorizationRequest | AccountSignIn) -> str | None:
    """The sign-in's passkey challenge, cleared in the same statement so it serves one answer only."""
    challenge = request.passkey_challenge
    if challenge is None:
        return None
    model = type(request)
    taken = db.session.execute(
        update(model)
        .where(model.id == request.id, model.passkey_challenge == challenge)
        .values(passkey_challenge=None)
        .returning(model.id)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    set_committed_value(request, "passkey_challenge", None)
    return challenge if taken is not None else None


def verify_login_passkey(request: AuthorizationRequest, client: Client, credential: str) -> LoginStep | Outcome:
    """Check a passkey answer of the login page (the first step, when the tree accepts a passkey
    alone) or of the passkey step (then it must be the signed-in user's): a LoginStep to show again
    on failure, the next Outcome on success.

    Every answer counts against the same attempts as the e-mail code, before it is checked.
    """
    second_step = request.candidate_user_id is not None and bool(request.amr)
    policy = sign_in_policy(client)
    if not (acr.passkeys_allowed(policy) if second_step else acr.passkey_alone_allowed(policy)):
        return LoginStep(request, client, "Passkeys are not used to sign in here.", error=True)
    if not count_sign_in_attempt(request):
        return LoginStep(request, client, _PASSKEY_RESTART, error=True, status=429)
    challenge = take_passkey_challenge(request)
    if challenge is None:
        return LoginStep(request, client, "This passkey request has expired. Try again.", error=True)
    try:
        verified = passkey_service.verify_passkey(
            credential,
            challenge,
            root_client_id=_root_id(client),
            user_id=request.candidate_user_id if second_step else None,
        )
    except PasskeyRefused:
        return LoginStep(request, client, "That passkey was not accepted. Try again.", error=True)
    return complete_sign_in(request, client, verified.user_id, verified.amr)


def cancel_sign_in(request: AuthorizationRequest) -> str:
    """Give up a sign-in that could not reach what its client requires: back to the client with
    `unmet_authentication_requirements` (OpenID Connect Unmet Authentication Requirements 1.0)."""
    if request.for_account:
        location = ACCOUNT_SIGN_IN_PAGE
    else:
        location = error_redirect(
            request, "unmet_authentication_requirements", "The user could not sign in as this application requires."
        )
    if request.device_authorization_id is not None:
        device.deny(request.device_authorization_id)
    db.session.delete(request)
    db.session.flush()
    return location


def _disabled_user(user_id: int) -> bool:
    """Whether the user was disabled (perhaps after their code was mailed) or is gone."""
    user = db.session.get(User, user_id)
    return user is None or user.disabled_at is not None


def continue_after_login(request: AuthorizationRequest, client: Client) -> Outcome:
    """After a sign-in step: the passkey step when the request should reach more and a passkey
    gets it there, then the consent page if needed, else the code back to the client.

    A user other than the one the request names (a `sub` of its `claims`) gets no answer: back to
    the client with `login_required`, the request spent.

    A request that reached less than it requires stays on the passkey step, which refuses it
    (`passkey_step`); one that reached what it requires but not what it wanted continues, claiming
    what it met.
    """
    if not RequestedClaims.from_json(request.claims).admits(subjects.subject_for(client, request.candidate_user_id)):
        location = error_redirect(request, "login_required", _NOT_THE_NAMED_USER)
        db.session.delete(request)
        db.session.flush()
        return Outcome(redirect_to=location)
    goal = request_target(request, client)
    level = acr.level_of(request.amr)
    with_passkey = acr.level_of(acr.combine(request.amr, _A_PASSKEY))
    can_step_up = with_passkey > level and acr.passkeys_allowed(sign_in_policy(client))
    if level < goal.wanted and can_step_up and (level < goal.required or _has_passkey(request.candidate_user_id)):
        return Outcome(page="passkey")
    if level < goal.required:
        return Outcome(page="passkey")
    request.user_id = request.candidate_user_id
    db.session.flush()
    scopes = request.scope.split()
    claims = RequestedClaims.from_json(request.claims)
    if request.for_account:
        return Outcome(redirect_to=_finish(request, client))  # the user's own page: nothing to consent to
    if "consent" in request.prompt.split() or not grants.consent_covers(request.user_id, client, scopes, claims):
        return Outcome(page="consent")
    return Outcome(redirect_to=_finish(request, client))


def _finish(request: AuthorizationRequest, client: Client) -> str:
    if request.for_account:
        location = request.redirect_uri
        db.session.delete(request)
        db.session.flush()
        return location
    if request.device_authorization_id is not None:
        return _approve_device(request, client)
    location = _issue_code(
        client=client,
        user_id=request.user_id,
        redirect_uri=request.redirect_uri,
        scope=request.scope,
        nonce=request.nonce,
        code_challenge=request.code_challenge,
        auth_time=as_utc(request.auth_time),
        state=request.rp_state,
        sid=request.sid,
        amr=request.amr or acr.LEGACY_AMR,
        acr_claim=acr.claimed_acr(request.amr or acr.LEGACY_AMR, _acr_values(request)),
        claims=request.claims,
        response_mode=request.response_mode,
        dpop_jkt=request.dpop_jkt,
    )
    db.session.delete(request)
    db.session.flush()
    return location


def _approve_device(request: AuthorizationRequest, client: Client) -> str:
    """Approve the request's device authorization (its device then redeems it at the token endpoint)
    and send the browser to the device page's last step."""
    amr = request.amr or acr.LEGACY_AMR
    approved = device.approve(
        request.device_authorization_id,
        user_id=request.user_id,
        auth_time=as_utc(request.auth_time),
        sid=request.sid,
        amr=amr,
        acr=acr.claimed_acr(amr, _acr_values(request)),
    )
    if approved and request.sid is not None:
        remember_session_client(request.sid, client.id, request.user_id)
    result = {"result": "approved"} if approved else {"error": "expired_token"}
    location = redirect_uri_with(request.redirect_uri, {**result, "client": privacy_reference(client)})
    db.session.delete(request)
    db.session.flush()
    return location


def signed_in_for(request: AuthorizationRequest) -> bool:
    """Whether the user has already signed in for this request, so the login page is not needed.

    With `prompt=login` the user must sign in again even when a session covered the request.
    """
    return request.user_id is not None and "login" not in request.prompt.split()


def require_signed_in(request: AuthorizationRequest) -> None:
    if request.user_id is None or request.auth_time is None:
        raise AuthorizationPageError(
            "Sign in first. Go back to the application and start again.",
            code="login_required",
            detail="The consent page needs a signed-in browser.",
        )


def consent_items(request: AuthorizationRequest, client: Client) -> tuple[str, ...]:
    """What the consent page asks the user to release to `client` for this request (see `grants`)."""
    return grants.requested_items(client, request.scope.split(), RequestedClaims.from_json(request.claims))


def shown_digest(request: AuthorizationRequest, client: Client) -> str:
    """The digest of what the consent page shows for this request, which the decision is bound to."""
    return grants.shown_digest(client, consent_items(request, client))


def decide_consent(request: AuthorizationRequest, client: Client, decision: str, shown: str | None = None) -> str:
    """Record the user's answer and return where the browser goes: the client, with a code or an error.

    `shown` is the digest of what the consent page showed (`shown_digest`): when the client's
    registration changed since (its claim mapping, whether it reads credentials),
    AuthorizationPageError (409) asks to review again.
    """
    require_signed_in(request)
    if decision == "deny":
        location = error_redirect(request, "access_denied", "The user declined to share their information.")
        if request.device_authorization_id is not None:
            device.deny(request.device_authorization_id)
            location = redirect_uri_with(location, {"client": privacy_reference(client)})
        db.session.delete(request)
        db.session.flush()
        return location
    if decision != "allow":
        raise AuthorizationPageError("Choose allow or deny.", detail="decision must be allow or deny.")
    if not texts_equal(shown or "", shown_digest(request, client)):
        raise AuthorizationPageError(
            f"The information {client.name} asks for changed while you were deciding. "
            "Go back, reload the page and review it again.",
            status=409,
            code="consent_changed",
            detail="The client's registration changed after the consent page was shown.",
        )
    grants.record_consent(request.user_id, client, request.scope.split(), RequestedClaims.from_json(request.claims))
    return _finish(request, client)


def signed_in_user(request: AuthorizationRequest) -> User | None:
    return db.session.get(User, request.user_id) if request.user_id is not None else None


def end_session(session_token: str | None) -> bool:
    """End the browser's single sign-on session and queue back-channel logouts; True if there was one."""
    session = find_live_session(session_token)
    if session is None:
        return False
    session.ended_at = utcnow()
    queue_logouts(session.sid)
    revoke_session_refresh_tokens(session.sid)
    db.session.flush()
    return True


def end_user_access(user_id: int) -> int:
    """End every live single sign-on session of the user (queueing their back-channel logouts) and
    revoke their refresh-token families: what `app.users.service.disable_user` asks of sign-in.

    Returns how many sessions ended. Flushes, never commits.
    """
    now = utcnow()
    sids = (
        db.session.execute(
            update(LoginSession)
            .where(LoginSession.user_id == user_id, LoginSession.ended_at.is_(None), LoginSession.expires_at > now)
            .values(ended_at=now)
            .returning(LoginSession.sid)
            .execution_options(synchronize_session=False)
        )
        .scalars()
        .all()
    )
    for sid in sids:
        queue_logouts(sid)
        revoke_session_refresh_tokens(sid)
    revoke_user_refresh_tokens(user_id)
    db.session.flush()
    return len(sids)


@dataclass(frozen=True)
class LogoutPlan:
    """Where the browser goes after logout, and whether the user must confirm it first."""

    target: str | None
    needs_confirmation: bool


def plan_logout(
    *,
    id_token_hint: str | None,
    client_id: str | None,
    post_logout_redirect_uri: str | None,
    state: str | None,
    session_token: str | None,
) -> LogoutPlan:
    """Decide an RP-initiated logout: its post-logout target and whether to ask the user first.

    The post-logout URI is honoured only when it is registered for the client named by the hint
    (or by `client_id`), never otherwise. Confirmation is skipped only when the hint is an
    id_token of the very user signed in on this browser, from a client of the session's tree
    (or when there is no session to end): were any id_token enough, a third-party page could
    sign the browser out with one of its own.
    """
    hint = tokens.decode_id_token_hint(id_token_hint) if id_token_hint else None
    audience = hint.get("aud") if hint else None
    hinted_client = audience[0] if isinstance(audience, list) and audience else audience
    if hint and client_id and str(hinted_client) != client_id:
        hint, hinted_client = None, None
    client = get_relying_party(str(hinted_client) if hinted_client else client_id)
    target = None
    if client is not None and post_logout_redirect_uri and post_logout_redirect_uri in (client.redirect_uris or []):
        target = redirect_uri_with(post_logout_redirect_uri, {"state": state})
    session = find_live_session(session_token)
    hint_proves_request = (
        hint is not None
        and client is not None
        and (
            session is None
            or (
                str(hint.get("sub")) == subjects.subject_for(client, session.user_id)
                and _root_id(client) == session.root_client_id
            )
        )
    )
    return LogoutPlan(target=target, needs_confirmation=not hint_proves_request)


def purge_expired(now: datetime | None = None) -> int:
    """Delete expired codes, requests (account sign-ins too), sessions, deny-list entries, refresh
    tokens, assertion jtis, pushed requests and device authorizations; returns rows removed."""
    now = now or utcnow()
    removed = 0
    # A used code is kept until its token has expired, so a late replay can still revoke it.
    for statement in (
        delete(AuthorizationCode).where(AuthorizationCode.expires_at <= now, AuthorizationCode.used_at.is_(None)),
        delete(AuthorizationCode).where(AuthorizationCode.access_token_expires_at <= now),
        delete(AuthorizationRequest).where(AuthorizationRequest.expires_at <= now),
        delete(AccountSignIn).where(AccountSignIn.expires_at <= now),
        delete(LoginSession).where(LoginSession.expires_at <= now),
        delete(RevokedToken).where(RevokedToken.expires_at <= now),
        delete(LoginCodeCounter).where(LoginCodeCounter.expires_at <= now),
        # A rotated refresh token is kept while its family lives, so its reuse can still be caught.
        delete(RefreshToken).where(RefreshToken.family_expires_at <= now),
        delete(ClientAssertion).where(ClientAssertion.expires_at <= now),
        delete(PushedRequest).where(PushedRequest.expires_at <= now),
        # Its sign-in requests go with it (ON DELETE CASCADE).
        delete(DeviceAuthorization).where(DeviceAuthorization.expires_at <= now),
        delete(SessionClient).where(
            SessionClient.sid.not_in(select(LoginSession.sid).where(LoginSession.sid.is_not(None)))
        ),
    ):
        removed += db.session.execute(statement).rowcount or 0
    return removed
