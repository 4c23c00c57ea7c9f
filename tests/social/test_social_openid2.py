"""OpenID 2.0 relying party against the fake game-store provider over real HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from app.social.openid2 import (
    OpenIdVerificationFailed,
    build_checkid_setup_url,
    verify_id_res,
)
from tests.support.social_fakes import FakeGameStore

STEAMID = "76561197960287930"
REALM = "https://tessera.example/"
RETURN_TO = "https://tessera.example/v1/social/platform_a/callback?state=abc"


def sign_in(fake: FakeGameStore, return_to: str = RETURN_TO) -> dict[str, str]:
    """Follow the user's browser to the provider and return the callback's query parameters."""
    url = build_checkid_setup_url(return_to=return_to, realm=REALM, op_endpoint=fake.openid_endpoint)
    answer = httpx.get(url)
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(return_to)
    return dict(parse_qsl(urlsplit(location).query))


def verify(fake: FakeGameStore, params: dict[str, str], **kwargs):
    return verify_id_res(params, return_to=RETURN_TO, op_endpoint=fake.openid_endpoint, **kwargs)


def test_checkid_setup_url_carries_the_openid_request() -> None:
    url = build_checkid_setup_url(return_to=RETURN_TO, realm=REALM)
    query = dict(parse_qsl(urlsplit(url).query))
    assert url.startswith("https://steamcommunity.com/openid/login?")
    assert query == {
        "openid.ns": "http://specs.openid.net/auth/2.0",
        "openid.mode": "checkid_setup",
        "openid.claimed_id": "http://specs.openid.net/auth/2.0/identifier_select",
        "openid.identity": "http://specs.openid.net/auth/2.0/identifier_select",
        "openid.return_to": RETURN_TO,
        "openid.realm": REALM,
    }


def test_valid_assertion_names_the_account(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    params = sign_in(game_store)
    assertion = verify(game_store, params)
    assert assertion.account_id == STEAMID
    assert assertion.claimed_id == f"https://steamcommunity.com/openid/id/{STEAMID}"
    assert assertion.nonce == params["openid.response_nonce"]
    assert game_store.calls["openid.check_authentication"] == 1


def test_forged_claimed_id_is_refused_by_the_provider(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    params = sign_in(game_store)
    other = "https://steamcommunity.com/openid/id/76561197960287931"
    params.update({"openid.claimed_id": other, "openid.identity": other})
    with pytest.raises(OpenIdVerificationFailed, match="did not confirm"):
        verify(game_store, params)
    assert game_store.calls["openid.check_authentication"] == 1


def test_made_up_signature_is_refused(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    params = sign_in(game_store)
    params["openid.sig"] = "QUJD" * 11
    with pytest.raises(OpenIdVerificationFailed):
        verify(game_store, params)


def test_replay_is_refused_by_a_strict_provider(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    params = sign_in(game_store)
    verify(game_store, params)
    with pytest.raises(OpenIdVerificationFailed):
        verify(game_store, params)


def test_replay_surfaces_the_same_nonce_for_the_caller_to_refuse(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    game_store.single_verification = False
    params = sign_in(game_store)
    first, second = verify(game_store, params), verify(game_store, params)
    assert first.nonce == second.nonce


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("openid.op_endpoint", "https://evil.example/openid/login", "provider endpoint"),
        ("openid.return_to", "https://evil.example/callback", "return_to"),
        ("openid.mode", "checkid_setup", "positive assertion"),
        ("openid.signed", "op_endpoint,claimed_id,identity,return_to", "does not sign"),
        ("openid.response_nonce", "garbage", "malformed"),
    ],
)
def test_bad_fields_are_refused_before_asking_the_provider(
    game_store: FakeGameStore, field: str, value: str, reason: str
) -> None:
    game_store.openid_user = STEAMID
    params = sign_in(game_store)
    params[field] = value
    with pytest.raises(OpenIdVerificationFailed, match=reason):
        verify(game_store, params)
    assert game_store.calls["openid.check_authentication"] == 0


def test_claimed_id_of_another_provider_is_refused(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    game_store.claimed_id_prefix = "https://other.example/id/"
    with pytest.raises(OpenIdVerificationFailed, match="claimed_id"):
        verify(game_store, sign_in(game_store))


def test_configurable_claimed_id_prefix(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    game_store.claimed_id_prefix = f"{game_store.base_url}/openid/id/"
    assertion = verify(game_store, sign_in(game_store), claimed_id_prefix=game_store.claimed_id_prefix)
    assert assertion.account_id == STEAMID


def test_stale_nonce_is_refused(game_store: FakeGameStore) -> None:
    game_store.openid_user = STEAMID
    params = sign_in(game_store)
    with pytest.raises(OpenIdVerificationFailed, match="stale"):
        verify(game_store, params, now=datetime.now(UTC) + timedelta(minutes=10))


def test_cancelled_sign_in_is_refused(game_store: FakeGameStore) -> None:
    game_store.openid_user = None
    with pytest.raises(OpenIdVerificationFailed, match="cancelled"):
        verify(game_store, sign_in(game_store))
