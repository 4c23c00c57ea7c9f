"""Sign in with a linked account, the platforms' side: which platforms a client tree accepts, the
platform's sign-in URL, proving the account the browser comes back with, and whom it signs in.

The login transaction (its `state`, the browser it is bound to, the attempts, the session) is
`app.oidc.linked`'s; this module decides only about accounts. Whom an account signs in is decided
in one place, `resolve_sign_in`, which never hands one user's account to another: a platform
account signs in the user it is linked to; an unlinked one creates an account only when the platform
verified its e-mail address, the tree allows sign-up and no user has that address; an address of an
existing user links only once that user has signed in another way (`link_pending`).

Functions flush, never commit. `prove_account` calls the platform: no transaction may be open.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from sqlalchemy import select

from app.errors import BadRequest, NotFound
from app.extensions import db
from app.security import decrypt, encrypt
from app.social import openid2, service
from app.social.connectors import ConnectorError, TokenSet
from app.social.errors import (
    LinkedAccountAmbiguous,
    LinkedAccountUnknown,
    LinkedAccountUnproven,
    LinkedEmailOfAnotherUser,
    LinkedEmailUnverified,
    LinkedSignUpClosed,
    PlatformNotConfigured,
)
from app.social.models import PLATFORMS, SocialLink
from app.tenancy.models import Client
from app.users.models import User
from app.users.service import create_user_in, find_user_by_email, get_enabled_user_in_tree

# What the sign-in page calls each platform.
PLATFORM_NAMES = {"platform_a": "Steam", "platform_b": "Discord", "platform_c": "Twitch"}
_PENDING_PURPOSE = "social.pending-sign-in-link"


@dataclass(frozen=True)
class ProvenAccount:
    """An account the platform proved the browser's user holds.

    `verified_email` only when the platform says it verified the address (Discord's `verified`);
    `openid_nonce` is the OpenID 2.0 assertion's nonce, recorded against replay by `resolve_sign_in`.
    """

    platform: str
    account_id: str
    account_name: str | None = None
    verified_email: str | None = None
    unverified_email: bool = False
    tokens: TokenSet | None = None
    openid_nonce: str | None = None


def sign_in_platforms(client: Client) -> tuple[str, ...]:
    """The platforms whose accounts sign in users of `client`'s tree: those its master client turned
    on that this deployment has configured, in platform order."""
    enabled = set(_root(client).linked_sign_in.split())
    return tuple(platform for platform in PLATFORMS if platform in enabled and _configured(platform))


def sign_up_allowed(client: Client) -> bool:
    """Whether a first sign-in with a linked account may create an account in `client`'s tree."""
    return _root(client).linked_sign_up


def _root(client: Client) -> Client:
    """The master client of `client`'s tree, whose choices its sub-clients inherit."""
    return client if client.root_id is None else db.session.get(Client, client.root_id) or client


def set_linked_sign_in(client_id: int, platforms: tuple[str, ...], sign_up: bool) -> Client:
    """Choose the platforms whose accounts sign in users of a master client's tree (its sub-clients
    inherit them; none turns the feature off) and whether a first such sign-in may create an account.

    Raises `NotFound` (an unknown id) and `BadRequest` (a sub-client or an unknown platform).
    Flushes, never commits.
    """
    client = db.session.get(Client, client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    if not client.is_master:
        raise BadRequest("Sign-in with linked accounts is set on the master client; its sub-clients inherit it.")
    unknown = sorted(set(platforms) - set(PLATFORMS))
    if unknown:
        raise BadRequest(f"Unknown platform {unknown[0]}: the platforms are {', '.join(PLATFORMS)}.")
    client.linked_sign_in = " ".join(platform for platform in PLATFORMS if platform in platforms)
    client.linked_sign_up = sign_up
    db.session.flush()
    return client


def _configured(platform: str) -> bool:
    config = service.settings()
    if platform == "platform_a":
        return bool(config.a_openid_url)
    return bool(config.b_client_id if platform == "platform_b" else config.c_client_id)


def sign_in_url(platform: str, state: str, callback: str) -> str:
    """Where the browser signs in at `platform` and is sent back to `callback` with `state`.

    Raises `PlatformNotConfigured`.
    """
    config = service.settings()
    if platform == "platform_a":
        parts = urlsplit(callback)
        return openid2.build_checkid_setup_url(
            return_to=_openid_return_to(callback, state),
            realm=f"{parts.scheme}://{parts.netloc}/",
            op_endpoint=config.a_openid_url,
        )
    return service.oauth_app_of(config, platform).authorization_url(redirect_uri=callback, state=state)


def _openid_return_to(callback: str, state: str) -> str:
    return f"{callback}?{urlencode({'state': state})}"


def prove_account(platform: str, params: Mapping[str, str], callback: str) -> ProvenAccount:
    """Verify what `platform` sent back through the browser to `callback`, as account linking does:
    OpenID 2.0 `check_authentication` for platform A, the code exchange and the account read for B
    and C. Calls the platform: no transaction may be open.

    Raises `LinkedAccountUnproven` (declined, forged or unusable answer) and `ConnectorError` subclasses
    when the platform cannot be asked.
    """
    if params.get("error"):
        raise LinkedAccountUnproven(f"You did not sign in at {PLATFORM_NAMES[platform]}.")
    config = service.settings()
    if platform == "platform_a":
        try:
            assertion = openid2.verify_id_res(
                params,
                return_to=_openid_return_to(callback, params.get("state", "")),
                op_endpoint=config.a_openid_url,
                claimed_id_prefix=config.a_claimed_id_prefix,
                timeout=config.http_timeout,
            )
        except openid2.OpenIdVerificationFailed as refused:
            raise LinkedAccountUnproven(f"Steam did not confirm your account ({refused.reason}).") from refused
        return ProvenAccount(platform, assertion.account_id, openid_nonce=assertion.nonce)
    code = params.get("code")
    if not code:
        raise LinkedAccountUnproven(f"{PLATFORM_NAMES[platform]} sent no authorization code back.")
    try:
        account, tokens = service.exchange_code_for_account(config, platform, code, callback)
    except PlatformNotConfigured as error:
        raise LinkedAccountUnproven(error.detail) from error
    except ConnectorError as error:
        if error.code in ("link_broken", "malformed_answer"):
            raise LinkedAccountUnproven(f"{PLATFORM_NAMES[platform]} did not confirm your account.") from error
        raise
    email = account.get("email") if platform == "platform_b" else None
    verified = account.get("verified") is True and isinstance(email, str) and "@" in email
    return ProvenAccount(
        platform,
        str(account["id"]),
        account.get("username" if platform == "platform_b" else "login"),
        verified_email=email if verified else None,
        unverified_email=isinstance(email, str) and not verified,
        tokens=tokens,
    )


def resolve_sign_in(client: Client, proven: ProvenAccount, *, sign_up: bool) -> int:
    """The id of the user of `client`'s tree whom `proven` signs in, linking or creating an account
    where the rules allow it (see the module docstring). `sign_up` says whether the tree allows
    creating accounts this way.

    Raises `LinkedAccountUnproven` (a replayed OpenID assertion), `LinkedAccountAmbiguous`,
    `LinkedAccountUnknown`, `LinkedEmailUnverified`, `LinkedSignUpClosed` and
    `LinkedEmailOfAnotherUser` (with the link to make once that user signs in). Flushes.
    """
    name = PLATFORM_NAMES[proven.platform]
    if proven.openid_nonce is not None:
        try:
            service.record_openid_nonce(proven.openid_nonce)
        except openid2.OpenIdVerificationFailed as refused:
            raise LinkedAccountUnproven("Steam's answer was already used. Try again.") from refused
    root_id = client.root_id or client.id
    owners = _linked_users(root_id, proven.platform, proven.account_id)
    if len(owners) > 1:
        raise LinkedAccountAmbiguous(
            f"This {name} account is linked to more than one account here, so it cannot sign you in. "
            "Sign in with your e-mail address instead."
        )
    if owners:
        user = get_enabled_user_in_tree(owners[0], root_id)
        if user is None:
            raise LinkedAccountUnknown(f"This {name} account cannot sign you in here.")
        return user.id
    if proven.verified_email is None:
        if proven.unverified_email:
            raise LinkedEmailUnverified(
                f"{name} has not verified your e-mail address, so we cannot create an account with it. "
                f"Verify it at {name}, or sign in with your e-mail address."
            )
        raise LinkedAccountUnknown(
            f"No account here is linked to this {name} account. Sign in with your e-mail address, then link "
            f"{name} from the application."
        )
    existing = find_user_by_email(root_id, proven.verified_email)
    if existing is not None:
        raise LinkedEmailOfAnotherUser(
            f"An account with the address {proven.verified_email} already exists, and your {name} account "
            f"is not linked to it. Sign in with your e-mail address below: {name} is linked once you have.",
            pending=_pending(existing.id, proven),
        )
    if not sign_up:
        raise LinkedSignUpClosed(
            f"No account here is linked to this {name} account, and {client.name} does not create "
            "accounts this way. Sign in with your e-mail address."
        )
    user = create_user_in(client.id, root_id, {"email_address": proven.verified_email})
    db.session.flush()
    service.request_fetch(
        service.store_link(user.id, client.id, proven.platform, proven.account_id, proven.account_name, proven.tokens)
    )
    return user.id


def _linked_users(root_id: int, platform: str, account_id: str) -> list[int]:
    return list(
        db.session.execute(
            select(SocialLink.user_id)
            .join(User, User.id == SocialLink.user_id)
            .where(
                User.root_client_id == root_id,
                SocialLink.platform == platform,
                SocialLink.account_id == account_id,
            )
        )
        .scalars()
        .all()
    )


def _has_link(user_id: int, platform: str) -> bool:
    statement = select(SocialLink.id).where(SocialLink.user_id == user_id, SocialLink.platform == platform)
    return db.session.execute(statement).first() is not None


def _pending(user_id: int, proven: ProvenAccount) -> dict:
    """The link to make once `user_id` signs in another way: plain JSON, its tokens encrypted."""
    tokens = proven.tokens
    return {
        "user_id": user_id,
        "platform": proven.platform,
        "account_id": proven.account_id,
        "account_name": proven.account_name,
        "tokens": encrypt(_token_text(tokens).encode(), _PENDING_PURPOSE) if tokens is not None else None,
    }


def _token_text(tokens: TokenSet) -> str:
    return json.dumps(
        {
            "access_token": tokens.access_token,
            "refresh_token": tokens.refresh_token,
            "expires_at": tokens.expires_at,
            "scope": tokens.scope,
        }
    )


def link_pending(pending: Mapping, user_id: int, client: Client) -> bool:
    """Link the pending platform account of a sign-in to `user_id` when it was waiting for them, no
    user of the tree holds that account meanwhile, and they have no account of that platform linked
    (which it would replace); whether it was linked. Flushes."""
    if pending.get("user_id") != user_id:
        return False
    root_id = client.root_id or client.id
    if _linked_users(root_id, pending["platform"], pending["account_id"]) or _has_link(user_id, pending["platform"]):
        return False
    tokens = None
    if pending.get("tokens"):
        tokens = TokenSet(**json.loads(decrypt(pending["tokens"], _PENDING_PURPOSE).decode()))
    service.request_fetch(
        service.store_link(
            user_id, client.id, pending["platform"], pending["account_id"], pending.get("account_name"), tokens
        )
    )
    return True
