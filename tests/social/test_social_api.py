"""Social links and data through HTTP, against fake platforms on loopback (issue 6)."""

from __future__ import annotations

import threading
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from sqlalchemy import select, update

from app.db import as_utc, transaction, utcnow
from app.extensions import db
from app.jobs import service as jobs_service
from app.jobs.models import Job
from app.social import service as social_service
from app.social.models import OpenIdNonce, SocialLink
from tests.support.config import change_settings
from tests.support.social import (
    RETURN_TO,
    age_links,
    create_user,
    finish_link,
    follow_callback,
    link,
    links_of,
    new_numeric_id,
    new_steamid,
    sign_in_browser,
    social_data,
    start_link,
    visit_platform,
    wait_for_fetches,
)
from tests.support.social_fakes import Platforms, SteamGame

# --- link flows ----------------------------------------------------------------------------------


def test_game_store_link_then_public_data(app, client, master, platforms: Platforms) -> None:
    steamid = new_steamid()
    platforms.game_store.add_player(
        steamid, personaname="gabe", games=[SteamGame(440, "Team Fortress 2", 1200, 30), SteamGame(570, "Dota 2", 50)]
    )
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)

    answer = social_data(client, master, user_id)
    assert answer.status_code == 200
    assert answer.json == {
        "platform_a": {
            "platform_a_id": steamid,
            "personaname": "gabe",
            "profileurl": f"https://steamcommunity.com/profiles/{steamid}/",
            "avatar": f"https://avatars.example/{steamid}.jpg",
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
    assert int(answer.headers["Age"]) >= 0
    assert platforms.game_store.calls["openid.check_authentication"] == 1
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1

    listed = client.get(f"/v1/user/{user_id}/social", headers=master.headers).json["data"]
    assert len(listed) == 1
    assert listed[0]["platform"] == "platform_a"
    assert listed[0]["account_id"] == steamid
    assert listed[0]["status"] == "linked"
    assert listed[0]["last_fetched_at"].endswith("Z")
    assert listed[0]["last_error"] is None


def test_private_game_store_profile_omits_undisclosed_fields(app, client, master, platforms: Platforms) -> None:
    steamid = new_steamid()
    platforms.game_store.add_player(steamid, public=False, personaname="hidden", games=[SteamGame(1, "x", 5, 5)])
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)

    assert social_data(client, master, user_id).json == {
        "platform_a": {
            "platform_a_id": steamid,
            "personaname": "hidden",
            "profileurl": f"https://steamcommunity.com/profiles/{steamid}/",
            "avatar": f"https://avatars.example/{steamid}.jpg",
            "personastate": 1,
        }
    }


def test_forged_openid_assertion_is_refused(app, client, master, platforms: Platforms) -> None:
    steamid, victim = new_steamid(), new_steamid()
    platforms.game_store.add_player(steamid)
    platforms.game_store.openid_user = steamid
    user_id = create_user(client, master)
    sign_in_browser(client, master, user_id)
    callback = visit_platform(start_link(client, master, user_id, "platform_a"))
    forged = callback.replace(steamid, victim)
    assert forged != callback

    outcome = follow_callback(client, forged)
    assert outcome["status"] == "error"
    assert outcome["error"] == "assertion_refused"
    assert client.get(f"/v1/user/{user_id}/social", headers=master.headers).json == {"data": []}
    assert platforms.game_store.api_calls == 0


def test_replayed_openid_callback_is_refused(app, client, master, platforms: Platforms) -> None:
    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    platforms.game_store.openid_user = steamid
    platforms.game_store.single_verification = False  # only our own checks stand against the replay
    user_id = create_user(client, master)
    sign_in_browser(client, master, user_id)
    callback = visit_platform(start_link(client, master, user_id, "platform_a"))
    assert follow_callback(client, callback)["status"] == "linked"

    replay = finish_link(client, callback)
    assert replay.status_code == 400
    assert "invalid_link_state" in replay.get_data(as_text=True)

    # The same assertion carried into a fresh link attempt of someone else's, in their browser.
    other_user = create_user(client, master)
    sign_in_browser(client, master, other_user)
    fresh_state = dict(parse_qsl(urlsplit(visit_platform(start_link(client, master, other_user, "platform_a"))).query))[
        "state"
    ]
    assertion = dict(parse_qsl(urlsplit(callback).query))
    smuggled = finish_link(client, "/v1/social/platform_a/callback?" + urlencode({**assertion, "state": fresh_state}))
    assert smuggled.status_code == 302
    assert dict(parse_qsl(urlsplit(smuggled.headers["Location"]).query))["error"] == "assertion_refused"
    assert client.get(f"/v1/user/{other_user}/social", headers=master.headers).json == {"data": []}
    with app.app_context():
        assert db.session.get(OpenIdNonce, assertion["openid.response_nonce"]) is not None
        db.session.rollback()


def test_wrong_oauth_state_is_refused_before_any_exchange(app, client, master, platforms: Platforms) -> None:
    discord_id = new_numeric_id()
    platforms.chat.add_user(discord_id)
    platforms.chat.authorize_as = discord_id
    user_id = create_user(client, master)
    callback = visit_platform(start_link(client, master, user_id, "platform_b"))
    query = dict(parse_qsl(urlsplit(callback).query))

    answer = finish_link(client, f"/v1/social/platform_b/callback?code={query['code']}&state=not-the-state")
    assert answer.status_code == 400
    assert "invalid_link_state" in answer.get_data(as_text=True)
    answer = finish_link(client, f"/v1/social/platform_c/callback?code={query['code']}&state={query['state']}")
    assert answer.status_code == 400
    assert platforms.chat.calls["oauth2.token"] == 0
    assert client.get(f"/v1/user/{user_id}/social", headers=master.headers).json == {"data": []}


def test_denied_oauth_consent_returns_an_error_to_the_tenant(app, client, master, platforms: Platforms) -> None:
    platforms.streaming.authorize_as = None
    user_id = create_user(client, master)
    sign_in_browser(client, master, user_id)
    outcome = follow_callback(client, visit_platform(start_link(client, master, user_id, "platform_c")))
    assert outcome["status"] == "error"
    assert outcome["error"] == "access_denied"
    assert platforms.streaming.calls["oauth2.token"] == 0


def test_chat_and_streaming_links_follow_every_page(app, client, master, platforms: Platforms) -> None:
    discord_id, twitch_id = new_numeric_id(), new_numeric_id()
    platforms.chat.add_user(discord_id, guild_count=250)
    streamer = platforms.streaming.add_user(twitch_id, followed_count=150, follower_count=77)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_b", discord_id)
    link(client, master, platforms, user_id, "platform_c", twitch_id)

    data = social_data(client, master, user_id).json
    assert set(data) == {"platform_b", "platform_c"}
    assert data["platform_b"]["email_verified"] is True
    assert len(data["platform_b"]["guilds"]) == 250
    assert data["platform_b"]["guilds"][0] == {"id": "800000000000000000", "name": "Guild 0", "owner": True}
    assert data["platform_c"] == {
        "username": f"streamer{twitch_id}",
        "view_count": 0,
        "follower_count": 77,
        "followed_channels": {
            "total": 150,
            "broadcasters": [
                {key: item[key] for key in ("broadcaster_login", "broadcaster_name", "followed_at")}
                for item in streamer.followed
            ],
        },
    }
    assert platforms.chat.calls["users/@me/guilds"] == 2
    assert platforms.streaming.calls["channels/followed"] == 2


def test_user_without_links_has_empty_social_data(app, client, master) -> None:
    user_id = create_user(client, master)
    answer = social_data(client, master, user_id)
    assert answer.status_code == 200
    assert answer.json == {}


def test_another_tenants_user_is_not_found(app, client, master, platforms: Platforms) -> None:
    from tests.support.tenancy import make_master

    user_id = create_user(client, master)
    stranger = make_master(app, "Someone else")
    for answer in (
        client.get(f"/v1/user/{user_id}/social_data", headers=stranger.headers),
        client.get(f"/v1/user/{user_id}/social", headers=stranger.headers),
        client.post(
            f"/v1/user/{user_id}/social/platform_a/link", json={"return_to": RETURN_TO}, headers=stranger.headers
        ),
        client.delete(f"/v1/user/{user_id}/social/platform_a", headers=stranger.headers),
    ):
        assert answer.status_code == 404
    assert client.get(f"/v1/user/{user_id}/social_data").status_code == 401


def test_link_request_is_validated(app, client, master) -> None:
    user_id = create_user(client, master)
    answer = client.post(
        f"/v1/user/{user_id}/social/platform_a/link", json={"return_to": "http://evil.example/"}, headers=master.headers
    )
    assert answer.status_code == 422
    assert "return_to" in answer.json["errors"]
    answer = client.post(
        f"/v1/user/{user_id}/social/myspace/link", json={"return_to": RETURN_TO}, headers=master.headers
    )
    assert answer.status_code == 404
    assert answer.json["code"] == "unknown_platform"


def test_unlink_deletes_the_data(app, client, master, platforms: Platforms) -> None:
    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)
    assert "platform_a" in social_data(client, master, user_id).json

    assert client.delete(f"/v1/user/{user_id}/social/platform_a", headers=master.headers).status_code == 204
    assert social_data(client, master, user_id).json == {}
    assert client.get(f"/v1/user/{user_id}/social", headers=master.headers).json == {"data": []}
    again = client.delete(f"/v1/user/{user_id}/social/platform_a", headers=master.headers)
    assert again.status_code == 404
    assert client.delete(f"/v1/user/{user_id}/social/myspace", headers=master.headers).json["code"] == (
        "unknown_platform"
    )


# --- fetching ------------------------------------------------------------------------------------


def fetch_job_attempts(app, user_id: int, platform: str) -> int:
    with app.app_context():
        jobs = db.session.execute(select(Job).where(Job.kind == "social.fetch")).scalars().all()
        attempts = [
            job.attempts
            for job in jobs
            if job.payload.get("user_id") == user_id and job.payload.get("platform") == platform
        ]
        db.session.rollback()
    assert len(attempts) == 1
    return attempts[0]


@pytest.mark.parametrize(
    ("platform", "endpoint"),
    [("platform_a", "GetOwnedGames"), ("platform_b", "users/@me/guilds"), ("platform_c", "channels/followed")],
)
def test_rate_limited_fetch_is_rescheduled_then_succeeds(
    app, client, master, platforms: Platforms, platform: str, endpoint: str
) -> None:
    account = new_steamid() if platform == "platform_a" else new_numeric_id()
    fake = dict(zip(("platform_a", "platform_b", "platform_c"), platforms.all(), strict=True))[platform]
    if platform == "platform_a":
        platforms.game_store.add_player(account)
    else:
        fake.add_user(account)
    fake.rate_limit_next(endpoint, retry_after=0.2)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, platform, account)

    wait_for_fetches(app, user_id)
    answer = social_data(client, master, user_id)
    assert answer.status_code == 200
    assert platform in answer.json
    assert fake.calls[endpoint] == 2
    assert fetch_job_attempts(app, user_id, platform) == 2


@pytest.mark.parametrize("platform", ["platform_b", "platform_c"])
def test_expired_token_is_refreshed_once_and_rotated(app, client, master, platforms: Platforms, platform: str) -> None:
    account = new_numeric_id()
    fake = platforms.chat if platform == "platform_b" else platforms.streaming
    fake.add_user(account)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, platform, account)
    wait_for_fetches(app, user_id)
    assert social_data(client, master, user_id).status_code == 200
    (before,) = links_of(app, user_id)

    fake.expire_tokens(account)
    age_links(app, user_id)
    fake.reset_calls()
    assert social_data(client, master, user_id).status_code == 200
    wait_for_fetches(app, user_id)

    (after,) = links_of(app, user_id)
    assert fake.calls["oauth2.token"] == 1
    assert after.refresh_token_encrypted != before.refresh_token_encrypted
    assert after.last_error is None
    assert after.last_fetched_at > before.last_fetched_at

    # The rotated refresh token is the one stored: a second expiry refreshes again.
    fake.expire_tokens(account)
    age_links(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)
    assert fake.calls["oauth2.token"] == 2
    assert links_of(app, user_id)[0].status == "linked"


def test_tokens_rotated_before_a_rate_limit_survive_the_deferred_fetch(
    app, client, master, platforms: Platforms
) -> None:
    account = new_numeric_id()
    platforms.chat.add_user(account)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_b", account)
    (before,) = links_of(app, user_id)

    platforms.chat.expire_tokens(account)
    with app.app_context(), transaction():
        db.session.execute(
            update(SocialLink)
            .where(SocialLink.id == before.id)
            .values(token_expires_at=utcnow() - timedelta(minutes=5))
        )
    age_links(app, user_id)
    platforms.chat.reset_calls()
    platforms.chat.rate_limit_next("users/@me/guilds", retry_after=0.2)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)

    # Refreshed once before the 429; the retry ran on the rotated tokens saved despite the
    # deferral (the old refresh token is dead: using it again would have broken the link).
    assert platforms.chat.calls["oauth2.token"] == 1
    assert platforms.chat.calls["users/@me/guilds"] == 2
    (after,) = links_of(app, user_id)
    assert after.status == "linked"
    assert after.last_error is None
    assert as_utc(after.last_fetched_at) > as_utc(before.last_fetched_at)
    assert after.refresh_token_encrypted != before.refresh_token_encrypted
    assert as_utc(after.token_expires_at) > utcnow()

    # And the stored refresh token is the live one: the next expiry refreshes with it.
    platforms.chat.expire_tokens(account)
    age_links(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)
    assert platforms.chat.calls["oauth2.token"] == 2
    (last,) = links_of(app, user_id)
    assert last.status == "linked"
    assert last.last_error is None


def pass_fetch_deferral(app, user_id: int) -> None:
    """Move the user's links past any deferral after a configuration fault."""
    with app.app_context(), transaction():
        db.session.execute(
            update(SocialLink)
            .where(SocialLink.user_id == user_id)
            .values(next_fetch_at=utcnow() - timedelta(seconds=1))
        )


def link_statuses(client, master, user_id: int) -> dict[str, dict]:
    listed = client.get(f"/v1/user/{user_id}/social", headers=master.headers).json["data"]
    return {item["platform"]: item for item in listed}


def test_wrong_api_key_is_a_configuration_fault_that_heals_without_relinking(
    app, client, master, platforms: Platforms, monkeypatch
) -> None:
    from app.social.tasks import refresh_stale

    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    monkeypatch.setattr(platforms.game_store, "api_key", "rotated-by-the-platform")  # ours is now wrong
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)
    wait_for_fetches(app, user_id)

    assert social_data(client, master, user_id).json == {}
    for _ in range(3):
        age_links(app, user_id)
        social_data(client, master, user_id)
        wait_for_fetches(app, user_id)
    refresh_stale.apply()
    assert links_of(app, user_id)[0].fetch_job_id is None  # the background refresh waits too
    status = link_statuses(client, master, user_id)["platform_a"]
    assert status["status"] == "linked"
    assert status["last_error"]["code"] == "platform_misconfigured"
    assert "403" in status["last_error"]["detail"]
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1
    assert platforms.game_store.api_calls == 1

    # The operator fixes the key; once the deferral is over the data comes back, no relinking.
    monkeypatch.undo()
    age_links(app, user_id)
    pass_fetch_deferral(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)
    answer = social_data(client, master, user_id)
    assert answer.status_code == 200
    assert answer.json["platform_a"]["platform_a_id"] == steamid
    status = link_statuses(client, master, user_id)["platform_a"]
    assert status["status"] == "linked"
    assert status["last_error"] is None


def test_refused_oauth_client_credentials_are_a_configuration_fault(
    app, client, master, platforms: Platforms, monkeypatch
) -> None:
    account = new_numeric_id()
    platforms.chat.add_user(account)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_b", account)
    first = social_data(client, master, user_id).json

    monkeypatch.setattr(platforms.chat.oauth, "client_secret", "rotated-at-the-platform")
    platforms.chat.expire_tokens(account)
    platforms.chat.reset_calls()
    for _ in range(2):
        age_links(app, user_id)
        social_data(client, master, user_id)
        wait_for_fetches(app, user_id)
    status = link_statuses(client, master, user_id)["platform_b"]
    assert status["status"] == "linked"
    assert status["last_error"]["code"] == "platform_misconfigured"
    assert platforms.chat.calls["oauth2.token"] == 1
    assert social_data(client, master, user_id).json == first  # last good data kept

    monkeypatch.undo()
    age_links(app, user_id)
    pass_fetch_deferral(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)
    status = link_statuses(client, master, user_id)["platform_b"]
    assert status["status"] == "linked"
    assert status["last_error"] is None
    assert platforms.chat.calls["oauth2.token"] == 2


@pytest.mark.parametrize(
    ("platform", "endpoint", "body", "named"),
    [
        ("platform_a", "GetOwnedGames", {"response": {"game_count": 1, "games": [{"name": "TF2"}]}}, "appid"),
        ("platform_b", "users/@me/guilds", [["a guild as an array"]], "guilds[0] should be an object"),
        ("platform_c", "channels/followed", {"total": 1, "data": [{"broadcaster_login": "x"}]}, "broadcaster_name"),
    ],
)
def test_malformed_platform_answer_is_recorded_and_keeps_the_last_good_data(
    app, client, master, platforms: Platforms, platform: str, endpoint: str, body, named: str
) -> None:
    account = new_steamid() if platform == "platform_a" else new_numeric_id()
    fake = dict(zip(("platform_a", "platform_b", "platform_c"), platforms.all(), strict=True))[platform]
    if platform == "platform_a":
        fake.add_player(account, games=[SteamGame(440, "TF2", 10, 1)])
    else:
        fake.add_user(account)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, platform, account)
    first = social_data(client, master, user_id).json
    assert platform in first

    fake.reset_calls()
    fake.answer_next(endpoint, body)
    age_links(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)

    status = link_statuses(client, master, user_id)[platform]
    assert status["status"] == "linked"
    assert status["last_error"]["code"] == "malformed_answer"
    assert named in status["last_error"]["detail"]
    assert social_data(client, master, user_id).json == first
    assert fake.calls[endpoint] == 1  # not retried at once

    # The next regular refresh reads the platform again, and the error clears.
    age_links(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)
    assert fake.calls[endpoint] == 2
    assert link_statuses(client, master, user_id)[platform]["last_error"] is None


def test_a_failing_platform_keeps_the_others_last_good_data(app, client, master, platforms: Platforms) -> None:
    steamid, discord_id = new_steamid(), new_numeric_id()
    platforms.game_store.add_player(steamid)
    platforms.chat.add_user(discord_id, guild_count=2)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)
    link(client, master, platforms, user_id, "platform_b", discord_id)
    wait_for_fetches(app, user_id)
    first = social_data(client, master, user_id).json

    del platforms.chat.users[discord_id]  # the account is gone: 401, refresh, 401 again
    platforms.chat.reset_calls()
    platforms.game_store.players[steamid].personaname = "renamed"
    age_links(app, user_id)
    social_data(client, master, user_id)
    wait_for_fetches(app, user_id)

    second = social_data(client, master, user_id).json
    assert second["platform_a"]["personaname"] == "renamed"
    assert second["platform_b"] == first["platform_b"]
    statuses = {
        item["platform"]: item for item in client.get(f"/v1/user/{user_id}/social", headers=master.headers).json["data"]
    }
    assert statuses["platform_a"]["status"] == "linked"
    assert statuses["platform_b"]["status"] == "broken"
    assert statuses["platform_b"]["last_error"]["code"] == "link_broken"
    assert platforms.chat.calls["oauth2.token"] == 1


def test_twenty_concurrent_requests_for_a_stale_user_refresh_once_per_platform(
    app, client, master, platforms: Platforms
) -> None:
    steamid, discord_id, twitch_id = new_steamid(), new_numeric_id(), new_numeric_id()
    platforms.game_store.add_player(steamid, games=[SteamGame(440, "TF2", 10, 1)])
    platforms.chat.add_user(discord_id)
    platforms.streaming.add_user(twitch_id)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)
    link(client, master, platforms, user_id, "platform_b", discord_id)
    link(client, master, platforms, user_id, "platform_c", twitch_id)
    wait_for_fetches(app, user_id)
    fresh = social_data(client, master, user_id).json
    assert set(fresh) == {"platform_a", "owned_games", "recent_played_games", "platform_b", "platform_c"}

    age_links(app, user_id)
    for fake in platforms.all():
        fake.reset_calls()
        fake.response_delay = 0.2
    barrier = threading.Barrier(20)
    answers: list[tuple[int, dict, str | None]] = []
    lock = threading.Lock()

    def ask() -> None:
        own_client = app.test_client()
        barrier.wait()
        answer = social_data(own_client, master, user_id)
        with lock:
            answers.append((answer.status_code, answer.json, answer.headers.get("Age")))

    threads = [threading.Thread(target=ask) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_for_fetches(app, user_id)

    assert [status for status, _, _ in answers] == [200] * 20
    assert all(body == fresh for _, body, _ in answers)
    assert all(age is not None for _, _, age in answers)
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1
    assert platforms.chat.calls["users/@me"] == 1
    assert platforms.streaming.calls["users"] == 1


def test_first_fetch_waits_then_answers_202_with_the_job(
    app, client, master, platforms: Platforms, monkeypatch, wait_for_job
) -> None:
    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    held: list[tuple] = []
    monkeypatch.setattr(jobs_service, "publish_job", lambda *args: held.append(args) or True)
    change_settings(monkeypatch, app, SOCIAL_DATA_WAIT=0.3)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid, wait=False)

    waits: list[tuple[float, object]] = []
    real_wait = social_service._wait_for_first_fetch

    def recorded_wait(caller, waited_user_id, timeout):
        view = real_wait(caller, waited_user_id, timeout)
        waits.append((timeout, view.data))
        return view

    monkeypatch.setattr(social_service, "_wait_for_first_fetch", recorded_wait)
    answer = social_data(client, master, user_id)
    assert answer.status_code == 202
    assert waits == [(0.3, None)]  # it waited the configured time for a fetch that never came
    assert answer.mimetype == "application/json"
    assert set(answer.json) == {"data"}
    assert "Age" not in answer.headers
    job = answer.json["data"]
    assert job["kind"] == "social.fetch"
    assert job["state"] == "queued"
    assert answer.headers["Location"].endswith(f"/v1/jobs/{job['id']}")
    assert social_data(client, master, user_id).status_code == 202
    assert platforms.game_store.api_calls == 0

    monkeypatch.undo()
    for args in held:
        jobs_service.publish_job(*args)
    assert wait_for_job(job["id"])["state"] == "succeeded"
    answer = social_data(client, master, user_id)
    assert answer.status_code == 200
    assert answer.json["platform_a"]["platform_a_id"] == steamid
    assert int(answer.headers["Age"]) >= 0
    # The job ran from the first request's early commit: the 202s published nothing else.
    assert len(held) == 1
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1


def test_social_data_documents_both_answers(client) -> None:
    responses = client.get("/openapi.json").json["paths"]["/v1/user/{user_id}/social_data"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/SocialDataOut")
    assert "Age" in responses["200"]["headers"]
    assert responses["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/JobEnvelope")
    assert "Location" in responses["202"]["headers"]


def test_background_refresh_fetches_stale_links(app, client, master, platforms: Platforms) -> None:
    from app.social.tasks import refresh_stale

    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)
    wait_for_fetches(app, user_id)
    age_links(app, user_id, seconds=10**6)  # older than anything other tests leave behind
    platforms.game_store.reset_calls()

    assert app.extensions["celery"].conf.beat_schedule["social-refresh"]["task"] == "social.refresh_stale"
    refresh_stale.apply()
    wait_for_fetches(app, user_id)
    (after,) = links_of(app, user_id)
    assert as_utc(after.last_fetched_at) > utcnow() - timedelta(seconds=60)
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1


# --- failures that end a fetch job ----------------------------------------------------------------


def hold_next_fetch(app, client, master, platforms: Platforms, monkeypatch) -> tuple[int, str]:
    """A linked, fetched game-store user whose next fetch job is created but not published."""
    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid)
    held: list[tuple] = []
    publish_job = jobs_service.publish_job
    monkeypatch.setattr(jobs_service, "publish_job", lambda *args: held.append(args) or True)
    age_links(app, user_id)
    assert social_data(client, master, user_id).status_code == 200
    monkeypatch.setattr(jobs_service, "publish_job", publish_job)
    ((job_id, kind, _),) = held
    assert kind == "social.fetch"
    platforms.game_store.reset_calls()
    return user_id, job_id


def run_fetch_here(app, job_id: str) -> None:
    from app.social.tasks import fetch

    with app.app_context():
        fetch.apply(args=[job_id])


def test_missing_platform_configuration_is_recorded_on_the_link(
    app, client, master, platforms: Platforms, monkeypatch
) -> None:
    user_id, job_id = hold_next_fetch(app, client, master, platforms, monkeypatch)
    monkeypatch.delenv("PLATFORM_A_API_KEY")
    change_settings(monkeypatch, app, PLATFORM_A_API_KEY="")

    run_fetch_here(app, job_id)

    status = link_statuses(client, master, user_id)["platform_a"]
    assert status["status"] == "linked"
    assert status["last_error"]["code"] == "platform_not_configured"
    assert platforms.game_store.api_calls == 0
    (after,) = links_of(app, user_id)
    assert after.fetch_job_id is None
    assert as_utc(after.next_fetch_at) > utcnow() + timedelta(minutes=30)


def test_exhausted_rate_limit_retries_are_recorded_on_the_link(
    app, client, master, platforms: Platforms, monkeypatch
) -> None:
    user_id, job_id = hold_next_fetch(app, client, master, platforms, monkeypatch)
    change_settings(monkeypatch, app, SOCIAL_MAX_ATTEMPTS=1)
    platforms.game_store.rate_limit_next("GetPlayerSummaries")

    run_fetch_here(app, job_id)

    status = link_statuses(client, master, user_id)["platform_a"]
    assert status["status"] == "linked"
    assert status["last_error"]["code"] == "rate_limited"
    assert platforms.game_store.calls["GetPlayerSummaries"] == 1
    assert "platform_a" in social_data(client, master, user_id).json  # the last good data stays


def test_a_fetch_job_the_worker_gave_up_on_is_recorded_on_the_link(
    app, client, master, platforms: Platforms, monkeypatch
) -> None:
    user_id, job_id = hold_next_fetch(app, client, master, platforms, monkeypatch)
    with app.app_context():
        # What the worker does when retries of a database fault are exhausted.
        jobs_service.fail_job(job_id, {"code": "retries_exhausted", "detail": "database unavailable"})

    status = link_statuses(client, master, user_id)["platform_a"]
    assert status["status"] == "linked"
    assert status["last_error"]["code"] == "retries_exhausted"
    assert status["last_error"]["detail"] == "database unavailable"
    (after,) = links_of(app, user_id)
    assert after.fetch_job_id is None
    answer = social_data(client, master, user_id)
    assert answer.status_code == 200
    assert "platform_a" in answer.json
    assert platforms.game_store.api_calls == 0  # no immediate re-fetch after the failure
