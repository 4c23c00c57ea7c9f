"""Fake platforms (real HTTP servers on loopback) for the social tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fakes import FakeChat, FakeGameStore, FakeStreaming


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
