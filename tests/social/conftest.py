"""Fake platforms (real HTTP servers on loopback) for the social tests.

Phase-one tests start their own fakes per test. The API tests share one set of fakes for the
session, started when this file is loaded (before any worker process starts), so the service and
a real worker process find them through the `PLATFORM_*` environment variables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.config import set_settings, setting_of
from tests.support.social_fakes import FakeChat, FakeGameStore, FakeStreaming, Platforms

_SESSION_PLATFORMS: Platforms | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SESSION_PLATFORMS
    game_store, chat, streaming = FakeGameStore().start(), FakeChat().start(), FakeStreaming().start()
    _SESSION_PLATFORMS = Platforms(game_store, chat, streaming)
    os.environ.update(
        {
            "PLATFORM_A_API_BASE": game_store.api_base,
            "PLATFORM_A_API_KEY": game_store.api_key,
            "PLATFORM_A_OPENID_URL": game_store.openid_endpoint,
            "PLATFORM_B_API_BASE": chat.api_base,
            "PLATFORM_B_OAUTH_BASE": chat.oauth_base,
            "PLATFORM_B_CLIENT_ID": chat.oauth.client_id,
            "PLATFORM_B_CLIENT_SECRET": chat.oauth.client_secret,
            "PLATFORM_C_API_BASE": streaming.api_base,
            "PLATFORM_C_OAUTH_BASE": streaming.oauth_base,
            "PLATFORM_C_CLIENT_ID": streaming.oauth.client_id,
            "PLATFORM_C_CLIENT_SECRET": streaming.oauth.client_secret,
            # Budgets are exercised by the connector tests and the benchmark; here they must not
            # turn eager (in-process, immediately retried) jobs into busy loops.
            "SOCIAL_BUDGETS": "platform_a=100000/1;platform_b=100000/1;platform_c=100000/1",
        }
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_PLATFORMS is not None:
        for fake in _SESSION_PLATFORMS.all():
            fake.stop()


@pytest.fixture(autouse=True)
def generous_login_rate_limit(app):
    """A link is finished in a browser signed in as its user: the tests sign in often, from 127.0.0.1."""
    previous = setting_of(app, "OIDC_LOGIN_RATE_LIMIT")
    set_settings(app, OIDC_LOGIN_RATE_LIMIT="100000 per minute")
    yield
    set_settings(app, OIDC_LOGIN_RATE_LIMIT=previous)


@pytest.fixture
def platforms() -> Iterator[Platforms]:
    """The session's fake platforms, with counters and switches reset for this test."""
    assert _SESSION_PLATFORMS is not None
    for fake in _SESSION_PLATFORMS.all():
        fake.reset_switches()
    _SESSION_PLATFORMS.game_store.api_key = os.environ["PLATFORM_A_API_KEY"]
    _SESSION_PLATFORMS.game_store.single_verification = True
    yield _SESSION_PLATFORMS


@pytest.fixture
def game_store() -> Iterator[FakeGameStore]:
    with FakeGameStore() as fake:
        yield fake


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as fake:
        yield fake


@pytest.fixture
def streaming() -> Iterator[FakeStreaming]:
    with FakeStreaming() as fake:
        yield fake
