"""Helpers of the linked-account sign-in tests: the fake platforms' settings, a tenant's switch,
links and platform accounts."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import delete, func, select

from app.db import transaction
from app.extensions import db
from app.social import service as social_service
from app.social import sign_in as social_sign_in
from app.social.models import SocialLink
from tests.support.social_fakes import Platforms


def platform_settings(fakes: Platforms) -> dict[str, str]:
    """The settings that send the service to the fake platforms."""
    game_store, chat, streaming = fakes.all()
    return {
        "PLATFORM_A_OPENID_URL": game_store.openid_endpoint,
        "PLATFORM_A_CLAIMED_ID_PREFIX": game_store.claimed_id_prefix,
        "PLATFORM_A_API_BASE": game_store.api_base,
        "PLATFORM_A_API_KEY": game_store.api_key,
        "PLATFORM_B_API_BASE": chat.api_base,
        "PLATFORM_B_OAUTH_BASE": chat.oauth_base,
        "PLATFORM_B_CLIENT_ID": chat.oauth.client_id,
        "PLATFORM_B_CLIENT_SECRET": chat.oauth.client_secret,
        "PLATFORM_C_API_BASE": streaming.api_base,
        "PLATFORM_C_OAUTH_BASE": streaming.oauth_base,
        "PLATFORM_C_CLIENT_ID": streaming.oauth.client_id,
        "PLATFORM_C_CLIENT_SECRET": streaming.oauth.client_secret,
    }


def turn_on(app, tenant, *platforms: str, sign_up: bool = False) -> None:
    """Let the tenant's users sign in with `platforms` (what `clients set-linked-sign-in` does)."""
    with app.app_context(), transaction():
        social_sign_in.set_linked_sign_in(tenant.client_id, platforms, sign_up)


def link_account(app, user_id: int, client_id: int, platform: str, account_id: str) -> None:
    """A user's link to a platform account, stored as the link flow stores it."""
    with app.app_context(), transaction():
        social_service.store_link(user_id, client_id, platform, account_id, None, None)


def new_account(fakes: Platforms, platform: str, **options) -> str:
    """A new account at the fake `platform`, which signs its next browser in as it."""
    if platform == "platform_a":
        account_id = "7656119" + "".join(secrets.choice("0123456789") for _ in range(10))
        fakes.game_store.openid_user = account_id
        return account_id
    account_id = str(secrets.randbelow(10**15) + 10**14)
    fake = fakes.chat if platform == "platform_b" else fakes.streaming
    fake.add_user(account_id, **options)
    fake.authorize_as = account_id
    return account_id


@contextmanager
def links_removed_afterwards(app) -> Iterator[None]:
    """Delete the social links made meanwhile: left behind, they fall due for the background refresh
    of a later test, which would call that test's fake platforms."""
    with app.app_context():
        before = db.session.scalar(select(func.max(SocialLink.id))) or 0
        db.session.rollback()
    try:
        yield
    finally:
        with app.app_context(), transaction():
            db.session.execute(delete(SocialLink).where(SocialLink.id > before))
