"""Sign in with a linked account (Steam by OpenID 2.0, Discord and Twitch by OAuth) on the hosted login.

The browser leaves for the platform with a fresh `state` whose hash the authorization request keeps
(`start_linked_sign_in`), and comes back to `/v1/openidc/login/linked/<platform>/callback`, under the
path of the browser cookie: the state is accepted once, only from the browser that started the
request (login CSRF), and counts against the request's sign-in attempts like a code or a passkey.
The platform is then asked with no transaction open, `app.social.sign_in` decides whom the account
signs in, and `authorize.complete_sign_in` ends it as every sign-in method ends (amr `fed`).
Functions flush; `finish_linked_sign_in` also commits before the edge (see there).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm.attributes import set_committed_value

from app.db import as_utc, commit_before_the_edge, utcnow
from app.extensions import db
from app.oidc import acr, authorize
from app.oidc.authorize import LoginStep, Outcome
from app.oidc.errors import AuthorizationPageError
from app.oidc.models import AuthorizationRequest
from app.oidc.service import get_relying_party
from app.oidc.settings import OidcSettings
from app.security import hash_secret, random_token
from app.settings import current
from app.social import sign_in
from app.social.connectors import ConnectorError
from app.social.errors import (
    LinkedEmailOfAnotherUser,
    LinkedPlatformUnavailable,
    LinkedSignInOff,
    LinkedSignInRefused,
)
from app.tenancy.models import Client

_TOO_MANY = "Too many sign-in attempts. Go back to the application and start again."


@dataclass(frozen=True)
class LinkedReturn:
    """Where a return from the platform leads: the next Outcome, or a LoginStep to show, with the
    request's new handle (the old one stayed in the browser's history; the platform never saw it)."""

    handle: str
    outcome: Outcome | None = None
    step: LoginStep | None = None


def linked_buttons(client: Client) -> list[tuple[str, str]]:
    """(platform, name) of each "Sign in with ..." button the login page of `client` shows."""
    return [(platform, sign_in.PLATFORM_NAMES[platform]) for platform in sign_in.sign_in_platforms(client)]


def callback_url(platform: str) -> str:
    """Our address the platform sends the browser back to (register it at Discord and Twitch)."""
    parts = urlsplit(current(OidcSettings).issuer)
    return f"{parts.scheme}://{parts.netloc}/v1/openidc/login/linked/{platform}/callback"


def start_linked_sign_in(request: AuthorizationRequest, client: Client, platform: str) -> str:
    """The platform URL that signs the browser in there and sends it back with a new `state`, which
    replaces any earlier one of the request. Raises `AuthorizationPageError` (404) for a platform the
    tree does not offer."""
    if platform not in sign_in.sign_in_platforms(client):
        raise AuthorizationPageError(
            f"{client.name} does not offer this way to sign in.",
            status=404,
            code=LinkedSignInOff.code,
            detail="The platform is unknown, not configured, or not turned on for this client's tree.",
        )
    state = random_token(32)
    request.linked_state_hash = _state_hash(state)
    request.linked_platform = platform
    db.session.flush()
    return sign_in.sign_in_url(platform, state, callback_url(platform))


def _state_hash(state: str) -> str:
    return hash_secret("linked-sign-in:" + state)


def finish_linked_sign_in(platform: str, params: dict[str, str], browser_token: str | None) -> LinkedReturn:
    """Complete a sign-in from the platform's return to our callback.

    A state that is unknown, used, expired, for another platform or from another browser raises
    `AuthorizationPageError` (400, `invalid_state`). Otherwise the state is spent and an attempt
    counted, and both are committed before the platform is called (no transaction may be open
    then, and a refusal must not give them back). A refusal (the platform's, or the account
    rules') is a LoginStep for the login page; success continues as every sign-in does.
    """
    request, client = _take_state(platform, params.get("state", ""), browser_token)
    handle = random_token(32)
    request.handle_hash = hash_secret("authz:" + handle)
    if not authorize.count_sign_in_attempt(request):
        return LinkedReturn(handle, step=LoginStep(request, client, _TOO_MANY, error=True, status=429))
    request_id, client_id = request.id, client.id
    commit_before_the_edge("a linked sign-in's state is spent and its attempt counted before the platform is called")
    try:
        proven: sign_in.ProvenAccount | LinkedSignInRefused = sign_in.prove_account(
            platform, params, callback_url(platform)
        )
    except LinkedSignInRefused as refused:
        proven = refused
    except ConnectorError:
        proven = LinkedPlatformUnavailable(
            f"{sign_in.PLATFORM_NAMES[platform]} could not be reached. Try again in a moment, "
            "or sign in with your e-mail address."
        )
    request = db.session.get(AuthorizationRequest, request_id)
    client = get_relying_party(str(client_id))
    if request is None or client is None:
        raise _expired()
    if isinstance(proven, LinkedSignInRefused):
        return LinkedReturn(handle, step=_refusal(request, client, proven))
    try:
        user_id = sign_in.resolve_sign_in(client, proven, sign_up=sign_in.sign_up_allowed(client))
    except LinkedEmailOfAnotherUser as refused:
        request.linked_pending = refused.pending
        db.session.flush()
        return LinkedReturn(handle, step=_refusal(request, client, refused))
    except LinkedSignInRefused as refused:
        return LinkedReturn(handle, step=_refusal(request, client, refused))
    return LinkedReturn(handle, outcome=authorize.complete_sign_in(request, client, user_id, (acr.FED,)))


def _refusal(request: AuthorizationRequest, client: Client, refused: LinkedSignInRefused) -> LoginStep:
    return LoginStep(request, client, refused.detail, error=True, status=refused.status)


def _take_state(platform: str, state: str, browser_token: str | None) -> tuple[AuthorizationRequest, Client]:
    """The request that sent this browser to `platform` with `state`, the state cleared in the same
    statement so it serves one return only."""
    if not state or not browser_token:
        raise _expired()
    state_hash = _state_hash(state)
    request = db.session.execute(
        select(AuthorizationRequest).where(AuthorizationRequest.linked_state_hash == state_hash)
    ).scalar_one_or_none()
    if (
        request is None
        or request.linked_platform != platform
        or as_utc(request.expires_at) <= utcnow()
        or not secrets.compare_digest(request.browser_hash, authorize.browser_hash(browser_token))
    ):
        raise _expired()
    taken = db.session.execute(
        update(AuthorizationRequest)
        .where(AuthorizationRequest.id == request.id, AuthorizationRequest.linked_state_hash == state_hash)
        .values(linked_state_hash=None)
        .returning(AuthorizationRequest.id)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if taken is None:
        raise _expired()
    set_committed_value(request, "linked_state_hash", None)
    client = get_relying_party(str(request.client_id))
    if client is None:
        raise AuthorizationPageError(
            "This application is no longer available.", code="invalid_client", detail="The client was disabled."
        )
    return request, client


def _expired() -> AuthorizationPageError:
    return AuthorizationPageError(
        "This sign-in cannot go on: it expired, was already used, or was started in another browser. "
        "Go back to the application and start again.",
        status=400,
        code="invalid_state",
        detail="The platform's state is unknown, used, expired, or belongs to another browser's request.",
    )
