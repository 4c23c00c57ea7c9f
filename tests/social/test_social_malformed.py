"""Platform answers out of their documented shape are a `MalformedAnswer` naming the member."""

from __future__ import annotations

from typing import Any

import pytest

from app.social.connectors import (
    ChatConnector,
    GameStoreConnector,
    MalformedAnswer,
    StreamingConnector,
    platform_b,
)
from tests.support.social_fakes import FakeChat, FakeGameStore, FakeStreaming, SteamGame

STEAMID = "76561197960287930"


@pytest.mark.parametrize(
    ("endpoint", "body", "named"),
    [
        ("GetPlayerSummaries", [], "answer should be an object"),
        ("GetPlayerSummaries", {"response": {"players": ["x"]}}, "players[0] should be an object"),
        (
            "GetPlayerSummaries",
            {"response": {"players": [{"steamid": STEAMID, "personaname": 5}]}},
            "player.personaname should be a string",
        ),
        (
            "GetOwnedGames",
            {"response": {"game_count": 1, "games": [{"name": "TF2", "playtime_forever": 1}]}},
            "GetOwnedGames game.appid should be an integer, found nothing",
        ),
        ("GetOwnedGames", {"response": {"game_count": "1", "games": []}}, "game_count should be an integer"),
        ("GetOwnedGames", {"response": {"game_count": 1, "games": {"appid": 440}}}, "games should be an array"),
        (
            "GetRecentlyPlayedGames",
            {"response": {"total_count": 1, "games": [{"appid": 440, "playtime_2weeks": "9"}]}},
            "playtime_2weeks should be an integer",
        ),
    ],
)
def test_malformed_game_store_answer(game_store: FakeGameStore, endpoint: str, body: Any, named: str) -> None:
    game_store.add_player(STEAMID, games=[SteamGame(440, "TF2", 10, 1)])
    game_store.answer_next(endpoint, body)
    with (
        GameStoreConnector(api_key=game_store.api_key, api_base=game_store.api_base) as connector,
        pytest.raises(MalformedAnswer) as raised,
    ):
        connector.fetch_social_data(STEAMID)
    assert named in raised.value.detail
    assert raised.value.detail.startswith("platform_a: ")
    assert raised.value.transient is False
    assert game_store.calls[endpoint] == 1


@pytest.mark.parametrize(
    ("endpoint", "body", "named"),
    [
        ("users/@me", {"username": "someone"}, "users/@me.id should be a string or an integer"),
        ("users/@me", {"id": "111", "username": ["x"]}, "users/@me.username should be a string"),
        ("users/@me/guilds", ["not a guild"], "guilds[0] should be an object"),
        ("users/@me/guilds", [{"id": "1"}], "guild.name should be a string"),
        ("users/@me/guilds", [{"id": "1", "name": "g", "owner": "yes"}], "guild.owner should be a boolean"),
        ("users/@me/guilds", {"guilds": []}, "guilds should be an array"),
    ],
)
def test_malformed_chat_answer(chat: FakeChat, endpoint: str, body: Any, named: str) -> None:
    chat.add_user("111")
    token = chat.issue_tokens("111")["access_token"]
    chat.answer_next(endpoint, body)
    with ChatConnector(api_base=chat.api_base) as connector, pytest.raises(MalformedAnswer) as raised:
        connector.fetch_social_data(token)
    assert named in raised.value.detail
    assert raised.value.transient is False


@pytest.mark.parametrize(
    ("endpoint", "body", "named"),
    [
        ("users", {"data": []}, "users.data is empty"),
        ("users", {"data": [{"id": "9001"}]}, "users.data[0].login should be a string"),
        ("channels/followers", {"total": "5", "data": []}, "channels/followers.total should be an integer"),
        (
            "channels/followed",
            {"total": 1, "data": [{"broadcaster_login": "a", "broadcaster_name": "A"}]},
            "followed channel.followed_at should be a string",
        ),
        ("channels/followed", {"total": 1, "data": "none"}, "channels/followed data should be an array"),
        (
            "channels/followed",
            {"total": 0, "data": [], "pagination": "abc"},
            "channels/followed.pagination should be an object",
        ),
    ],
)
def test_malformed_streaming_answer(streaming: FakeStreaming, endpoint: str, body: Any, named: str) -> None:
    streaming.add_user("9001")
    token = streaming.issue_tokens("9001")["access_token"]
    streaming.answer_next(endpoint, body)
    with (
        StreamingConnector(client_id=streaming.oauth.client_id, api_base=streaming.api_base) as connector,
        pytest.raises(MalformedAnswer) as raised,
    ):
        connector.fetch_social_data(token)
    assert named in raised.value.detail
    assert raised.value.detail.startswith("platform_c: ")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"access_token": 5, "token_type": "Bearer"}, "token answer.access_token should be a string"),
        ({"access_token": "a", "token_type": "Bearer", "refresh_token": 7}, "refresh_token should be a string"),
        ({"access_token": "a", "token_type": "Bearer", "expires_in": "soon"}, "token answer"),
    ],
)
def test_malformed_token_answer(chat: FakeChat, body: Any, named: str) -> None:
    chat.add_user("111")
    refresh_token = chat.issue_tokens("111")["refresh_token"]
    chat.answer_next("oauth2.token", body)
    oauth = platform_b.oauth_app(
        client_id=chat.oauth.client_id, client_secret=chat.oauth.client_secret, oauth_base=chat.oauth_base
    )
    with pytest.raises(MalformedAnswer) as raised:
        oauth.refresh(refresh_token)
    assert named in raised.value.detail
