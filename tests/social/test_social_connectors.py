"""Connectors against the fake platforms over real HTTP: mapping, pagination, errors, refresh."""

from __future__ import annotations

import httpx
import pytest

from app.social.budget import CallBudget, Rate
from app.social.connectors import (
    BudgetExhausted,
    ChatConnector,
    GameStoreConnector,
    LinkBroken,
    PlatformMisconfigured,
    PlatformUnavailable,
    RateLimited,
    StreamingConnector,
    TokenExpired,
    TokenSet,
    call_with_refresh,
    platform_b,
    platform_c,
)
from tests.support.social_fakes import FakeChat, FakeGameStore, FakeStreaming, SteamGame

STEAMID = "76561197960287930"


def game_store_connector(fake: FakeGameStore, **kwargs) -> GameStoreConnector:
    return GameStoreConnector(api_key=kwargs.pop("api_key", fake.api_key), api_base=fake.api_base, **kwargs)


# --- platform A ----------------------------------------------------------------------------------


def test_public_player_is_mapped_exactly(game_store: FakeGameStore) -> None:
    game_store.add_player(
        STEAMID,
        personaname="gabe",
        games=[SteamGame(440, "Team Fortress 2", 1200, 30), SteamGame(570, "Dota 2", 50)],
    )
    with game_store_connector(game_store) as connector:
        data = connector.fetch_social_data(STEAMID)

    assert data == {
        "platform_a": {
            "platform_a_id": STEAMID,
            "personaname": "gabe",
            "profileurl": f"https://steamcommunity.com/profiles/{STEAMID}/",
            "avatar": f"https://avatars.example/{STEAMID}.jpg",
            "personastate": 1,
            "timecreated": 1262304000,
        },
        "owned_games": {
            "game_count": 2,
            "games": [
                {"appid": "440", "name": "Team Fortress 2", "playtime_2weeks": 30, "playtime_forever": 1200},
                {"appid": "570", "name": "Dota 2", "playtime_2weeks": 0, "playtime_forever": 50},
            ],
        },
        "recent_played_games": {
            "total_count": 1,
            "games": [{"appid": "440", "name": "Team Fortress 2", "playtime_2weeks": 30, "playtime_forever": 1200}],
        },
    }
    assert game_store.calls == {"GetPlayerSummaries": 1, "GetOwnedGames": 1, "GetRecentlyPlayedGames": 1}


def test_public_player_without_recent_games_has_empty_list(game_store: FakeGameStore) -> None:
    game_store.add_player(STEAMID, games=[SteamGame(570, "Dota 2", 50)])
    with game_store_connector(game_store) as connector:
        assert connector.fetch_recently_played_games(STEAMID) == {"total_count": 0, "games": []}


def test_private_player_omits_what_it_does_not_disclose(game_store: FakeGameStore) -> None:
    game_store.add_player(STEAMID, public=False, personaname="hidden", games=[SteamGame(440, "TF2", 5, 5)])
    with game_store_connector(game_store) as connector:
        data = connector.fetch_social_data(STEAMID)

    assert data == {
        "platform_a": {
            "platform_a_id": STEAMID,
            "personaname": "hidden",
            "profileurl": f"https://steamcommunity.com/profiles/{STEAMID}/",
            "avatar": f"https://avatars.example/{STEAMID}.jpg",
            "personastate": 1,
        }
    }


def test_rate_limit_without_hint_then_success(game_store: FakeGameStore) -> None:
    game_store.add_player(STEAMID)
    game_store.rate_limit_next("GetPlayerSummaries")
    with game_store_connector(game_store) as connector:
        with pytest.raises(RateLimited) as raised:
            connector.fetch_player_summary(STEAMID)
        assert raised.value.retry_after is None
        assert connector.fetch_player_summary(STEAMID)["platform_a_id"] == STEAMID
    assert game_store.calls["GetPlayerSummaries"] == 2


def test_wrong_api_key_is_a_configuration_fault_after_one_call(game_store: FakeGameStore) -> None:
    game_store.add_player(STEAMID)
    with game_store_connector(game_store, api_key="wrong") as connector, pytest.raises(PlatformMisconfigured):
        connector.fetch_social_data(STEAMID)
    assert game_store.api_calls == 1


def test_unknown_account_is_a_broken_link(game_store: FakeGameStore) -> None:
    with game_store_connector(game_store) as connector, pytest.raises(LinkBroken):
        connector.fetch_player_summary(STEAMID)


def test_spent_budget_sends_nothing(game_store: FakeGameStore) -> None:
    game_store.add_player(STEAMID)
    budget = CallBudget({"platform_a": [Rate(2, 60)]})
    connector = game_store_connector(game_store, budget=budget)
    with connector, pytest.raises(BudgetExhausted) as raised:
        connector.fetch_social_data(STEAMID)
    assert 0 < raised.value.retry_after <= 60
    assert isinstance(raised.value, RateLimited)
    assert game_store.api_calls == 2


def test_unreachable_platform_is_transient() -> None:
    connector = GameStoreConnector(api_key="k", api_base="http://127.0.0.1:9", timeout=2)
    with connector, pytest.raises(PlatformUnavailable) as raised:
        connector.fetch_player_summary(STEAMID)
    assert raised.value.transient is True


# --- platform B ----------------------------------------------------------------------------------


def chat_connector(fake: FakeChat, **kwargs) -> ChatConnector:
    return ChatConnector(api_base=fake.api_base, **kwargs)


def chat_oauth(fake: FakeChat):
    return platform_b.oauth_app(
        client_id=fake.oauth.client_id, client_secret=fake.oauth.client_secret, oauth_base=fake.oauth_base
    )


def test_chat_user_and_every_guild_page(chat: FakeChat) -> None:
    chat.add_user("111", guild_count=250)
    token = chat.issue_tokens("111")["access_token"]
    with chat_connector(chat) as connector:
        data = connector.fetch_social_data(token)

    guilds = data["platform_b"]["guilds"]
    assert data["platform_b"]["email_verified"] is True
    assert len(guilds) == 250
    assert len({guild["id"] for guild in guilds}) == 250
    assert guilds[0] == {"id": "800000000000000000", "name": "Guild 0", "owner": True}
    assert guilds[1] == {"id": "800000000000000001", "name": "Guild 1", "owner": False}
    assert chat.calls == {"users/@me": 1, "users/@me/guilds": 2}


def test_chat_user_without_email_scope_or_guilds(chat: FakeChat) -> None:
    chat.add_user("222", guild_count=0, verified=None)
    token = chat.issue_tokens("222")["access_token"]
    with chat_connector(chat) as connector:
        assert connector.fetch_social_data(token) == {"platform_b": {"guilds": []}}


def test_chat_rate_limit_reads_body_retry_after(chat: FakeChat) -> None:
    chat.add_user("111")
    token = chat.issue_tokens("111")["access_token"]
    chat.rate_limit_next("users/@me/guilds", retry_after=0.25)
    with chat_connector(chat) as connector:
        with pytest.raises(RateLimited) as raised:
            connector.fetch_guilds(token)
        assert raised.value.retry_after == pytest.approx(0.25)
        assert len(connector.fetch_guilds(token)) == 3


def test_chat_link_flow_exchanges_code_once(chat: FakeChat) -> None:
    chat.add_user("111")
    chat.authorize_as = "111"
    oauth = chat_oauth(chat)
    redirect_uri = "https://tessera.example/v1/social/platform_b/callback"
    url = oauth.authorization_url(redirect_uri=redirect_uri, state="st4te")
    assert "scope=identify+email+guilds" in url

    answer = httpx.get(url)
    assert answer.status_code == 302
    callback = httpx.URL(answer.headers["Location"])
    assert callback.params["state"] == "st4te"
    tokens = oauth.exchange_code(code=callback.params["code"], redirect_uri=redirect_uri)
    assert tokens.refresh_token and tokens.expires_at is not None
    assert tokens.scope == "identify email guilds"
    with chat_connector(chat) as connector:
        assert connector.fetch_current_user(tokens.access_token)["id"] == "111"

    with pytest.raises(LinkBroken):
        oauth.exchange_code(code=callback.params["code"], redirect_uri=redirect_uri)


def test_chat_expired_token_refreshes_once_and_rotates(chat: FakeChat) -> None:
    chat.add_user("111")
    issued = TokenSet.from_token_response(chat.issue_tokens("111"))
    chat.expire_tokens("111")
    saved: list[TokenSet] = []
    with chat_connector(chat) as connector:
        data = call_with_refresh(connector.fetch_social_data, issued, chat_oauth(chat), saved.append)

    assert len(data["platform_b"]["guilds"]) == 3
    assert len(saved) == 1
    assert saved[0].refresh_token != issued.refresh_token
    assert chat.calls["oauth2.token"] == 1
    assert chat.calls["users/@me"] == 2
    with pytest.raises(LinkBroken):
        chat_oauth(chat).refresh(issued.refresh_token)


def test_token_past_expiry_is_refreshed_before_calling(chat: FakeChat) -> None:
    chat.add_user("111")
    issued = TokenSet.from_token_response(chat.issue_tokens("111"), now=0)
    saved: list[TokenSet] = []
    with chat_connector(chat) as connector:
        call_with_refresh(connector.fetch_current_user, issued, chat_oauth(chat), saved.append)
    assert len(saved) == 1
    assert chat.calls == {"oauth2.token": 1, "users/@me": 1}


def test_token_refused_after_refresh_breaks_the_link_without_a_storm(chat: FakeChat) -> None:
    chat.add_user("111")
    issued = TokenSet.from_token_response(chat.issue_tokens("111"))
    del chat.users["111"]
    with chat_connector(chat) as connector, pytest.raises(LinkBroken):
        call_with_refresh(connector.fetch_current_user, issued, chat_oauth(chat), lambda tokens: None)
    assert chat.calls == {"oauth2.token": 1, "users/@me": 2}


def test_chat_token_endpoint_rate_limit(chat: FakeChat) -> None:
    chat.add_user("111")
    issued = chat.issue_tokens("111")
    chat.rate_limit_next("oauth2.token", retry_after=2.5)
    with pytest.raises(RateLimited) as raised:
        chat_oauth(chat).refresh(issued["refresh_token"])
    assert raised.value.retry_after == pytest.approx(2.5)
    assert chat_oauth(chat).refresh(issued["refresh_token"]).access_token


def test_chat_401_is_token_expired(chat: FakeChat) -> None:
    with chat_connector(chat) as connector, pytest.raises(TokenExpired):
        connector.fetch_current_user("not-a-token")


# --- platform C ----------------------------------------------------------------------------------


def streaming_connector(fake: FakeStreaming, **kwargs) -> StreamingConnector:
    return StreamingConnector(client_id=fake.oauth.client_id, api_base=fake.api_base, **kwargs)


def streaming_oauth(fake: FakeStreaming):
    return platform_c.oauth_app(
        client_id=fake.oauth.client_id, client_secret=fake.oauth.client_secret, oauth_base=fake.oauth_base
    )


def test_streaming_user_follows_every_page(streaming: FakeStreaming) -> None:
    user = streaming.add_user("9001", followed_count=250, follower_count=1234)
    token = streaming.issue_tokens("9001")["access_token"]
    with streaming_connector(streaming) as connector:
        data = connector.fetch_social_data(token)

    member = data["platform_c"]
    assert member["username"] == "streamer9001"
    assert member["view_count"] == 0
    assert member["follower_count"] == 1234
    assert member["followed_channels"]["total"] == 250
    assert member["followed_channels"]["broadcasters"] == [
        {key: item[key] for key in ("broadcaster_login", "broadcaster_name", "followed_at")} for item in user.followed
    ]
    assert streaming.calls == {"users": 1, "channels/followers": 1, "channels/followed": 3}


def test_streaming_user_with_nothing(streaming: FakeStreaming) -> None:
    streaming.add_user("9002", followed_count=0, follower_count=0)
    token = streaming.issue_tokens("9002")["access_token"]
    with streaming_connector(streaming) as connector:
        assert connector.fetch_social_data(token) == {
            "platform_c": {
                "username": "streamer9002",
                "view_count": 0,
                "follower_count": 0,
                "followed_channels": {"total": 0, "broadcasters": []},
            }
        }


def test_streaming_rate_limit_reads_reset_epoch(streaming: FakeStreaming) -> None:
    streaming.add_user("9001")
    token = streaming.issue_tokens("9001")["access_token"]
    streaming.rate_limit_next("users", retry_after=3)
    with streaming_connector(streaming) as connector:
        with pytest.raises(RateLimited) as raised:
            connector.fetch_current_user(token)
        assert 3 <= raised.value.retry_after <= 5
        assert connector.fetch_current_user(token)["id"] == "9001"
    assert streaming.calls["users"] == 2


def test_streaming_link_flow_and_refresh_rotation(streaming: FakeStreaming) -> None:
    streaming.add_user("9001")
    streaming.authorize_as = "9001"
    oauth = streaming_oauth(streaming)
    redirect_uri = "https://tessera.example/v1/social/platform_c/callback"
    callback = httpx.URL(httpx.get(oauth.authorization_url(redirect_uri=redirect_uri, state="s")).headers["Location"])
    tokens = oauth.exchange_code(code=callback.params["code"], redirect_uri=redirect_uri)
    assert tokens.scope == "user:read:follows"

    streaming.expire_tokens("9001")
    saved: list[TokenSet] = []
    with streaming_connector(streaming) as connector:
        data = call_with_refresh(connector.fetch_social_data, tokens, oauth, saved.append)
    assert data["platform_c"]["username"] == "streamer9001"
    assert [new.refresh_token != tokens.refresh_token for new in saved] == [True]
    assert streaming.calls["oauth2.token"] == 2
    with pytest.raises(LinkBroken):
        oauth.refresh(tokens.refresh_token)


def test_streaming_wrong_client_secret_is_a_broken_link(streaming: FakeStreaming) -> None:
    streaming.add_user("9001")
    issued = streaming.issue_tokens("9001")
    oauth = platform_c.oauth_app(
        client_id=streaming.oauth.client_id, client_secret="wrong", oauth_base=streaming.oauth_base
    )
    with pytest.raises(LinkBroken):
        oauth.refresh(issued["refresh_token"])


def test_streaming_quota_is_enforced_by_the_fake(streaming: FakeStreaming) -> None:
    streaming.add_user("9001")
    token = streaming.issue_tokens("9001")["access_token"]
    streaming.set_quota(2, 60)
    with streaming_connector(streaming) as connector:
        connector.fetch_current_user(token)
        connector.fetch_current_user(token)
        with pytest.raises(RateLimited) as raised:
            connector.fetch_current_user(token)
    assert raised.value.retry_after > 50
    assert streaming.quota_refusals == 1


# --- retry delays --------------------------------------------------------------------------------


def test_retry_delay_prefers_the_platform_hint_with_a_little_jitter() -> None:
    from app.social.connectors import retry_delay

    hinted = RateLimited("x", retry_after=10.0)
    assert retry_delay(hinted, 1, rng=lambda: 0.0) == 10.0
    assert retry_delay(hinted, 1, rng=lambda: 1.0) == pytest.approx(11.0)
    assert retry_delay(RateLimited("x", retry_after=5000.0), 1, cap=900) == 900


def test_retry_delay_without_hint_backs_off_exponentially_with_full_jitter() -> None:
    from app.social.connectors import retry_delay

    silent = RateLimited("x")
    assert [retry_delay(silent, attempt, rng=lambda: 1.0) for attempt in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]
    assert retry_delay(silent, 30, rng=lambda: 1.0) == 900.0
    assert retry_delay(PlatformUnavailable("down"), 3, rng=lambda: 0.5) == 4.0
    assert retry_delay(silent, 1, rng=lambda: 0.0) == 0.1
