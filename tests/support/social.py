"""Helpers of the social tests: users, the browser signed in as one, the whole link flow through a
fake platform, fetch waits."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

import httpx
from sqlalchemy import select, update

from app.db import transaction, utcnow
from app.extensions import db
from app.jobs import service as jobs_service
from app.jobs.models import Job
from app.social.models import SocialLink
from tests.support.oidc import Tenant, path_of, sign_in

if TYPE_CHECKING:
    from tests.support.social_fakes import Platforms

RETURN_TO = "https://tenant.example/after-link?from=tessera"
SIGN_IN_REDIRECT = "https://tenant.example/signed-in"


def new_steamid() -> str:
    return "7656119" + "".join(secrets.choice("0123456789") for _ in range(10))


def new_numeric_id() -> str:
    return str(secrets.randbelow(10**15) + 10**14)


def create_user(client, master) -> int:
    answer = client.post(
        "/v1/user/create",
        json={"profile": {"email_address": f"{secrets.token_hex(6)}@example.org"}},
        headers=master.headers,
    )
    assert answer.status_code == 201, answer.json
    return answer.json["data"]["user_id"]


def sign_in_browser(client, master, user_id: int) -> None:
    """Sign the test client (the person's browser) in as the user, by the hosted sign-in of a new
    application of the master's tree: a link is finished only in the browser of its user."""
    profile = client.get(f"/v1/user/{user_id}", headers=master.headers)
    assert profile.status_code == 200, profile.json
    application = client.post(
        "/v1/sub_client", json={"name": "Linking app", "redirect_uris": [SIGN_IN_REDIRECT]}, headers=master.headers
    )
    assert application.status_code == 201, application.json
    person = Tenant(application.json["data"]["client_id"], "", master.api_token, SIGN_IN_REDIRECT, user_id,
                    profile.json["data"]["profile"]["email_address"], "")  # fmt: skip
    assert "code" in sign_in(client, person, scope="openid", prompt="login")


def start_link(client, master, user_id: int, platform: str) -> str:
    answer = client.post(
        f"/v1/user/{user_id}/social/{platform}/link", json={"return_to": RETURN_TO}, headers=master.headers
    )
    assert answer.status_code == 200, answer.json
    assert set(answer.json) == {"authorization_url", "expires_at"}
    assert answer.json["expires_at"].endswith("Z")
    return answer.json["authorization_url"]


def visit_platform(authorization_url: str) -> str:
    """The user's browser at the platform: returns the path + query of our callback it is sent to."""
    answer = httpx.get(authorization_url)
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["Location"])
    return f"{location.path}?{location.query}"


def finish_link(client, callback: str):
    """Our callback, which sends the browser on to the hosted page that finishes the link; that
    page's answer."""
    hop = client.get(callback)
    assert hop.status_code == 303, hop.get_data(as_text=True)
    assert urlsplit(hop.headers["Location"]).path.startswith("/v1/openidc/social/")
    return client.get(path_of(hop.headers["Location"]))


def follow_callback(client, callback: str) -> dict[str, str]:
    """Our callback in a browser signed in as the user; returns the query our redirect to `return_to` carries."""
    answer = finish_link(client, callback)
    assert answer.status_code == 302, answer.get_data(as_text=True)
    target = urlsplit(answer.headers["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == "https://tenant.example/after-link"
    return dict(parse_qsl(target.query))


def link(client, master, platforms: Platforms, user_id: int, platform: str, account: str, *, wait: bool = True) -> None:
    """Link `account` through the whole browser flow, the browser signed in as the user; with `wait`,
    until its first fetch is done."""
    if platform == "platform_a":
        platforms.game_store.openid_user = account
    elif platform == "platform_b":
        platforms.chat.authorize_as = account
    else:
        platforms.streaming.authorize_as = account
    sign_in_browser(client, master, user_id)
    outcome = follow_callback(client, visit_platform(start_link(client, master, user_id, platform)))
    assert outcome == {"from": "tessera", "status": "linked", "platform": platform}
    if wait:
        wait_for_fetches(client.application, user_id)


def links_of(app, user_id: int) -> list[SocialLink]:
    with app.app_context():
        rows = db.session.execute(select(SocialLink).where(SocialLink.user_id == user_id)).scalars().all()
        db.session.expunge_all()
        db.session.rollback()
        return list(rows)


def wait_for_fetches(app, user_id: int, timeout: float = 30) -> None:
    """Until no fetch job of the user's links is queued or running (a real worker may be busy)."""
    deadline = time.monotonic() + timeout
    while True:
        with app.app_context():
            job_ids = [link.fetch_job_id for link in links_of(app, user_id) if link.fetch_job_id]
            states = [db.session.get(Job, job_id).state for job_id in job_ids]
            db.session.rollback()
        if all(state in ("succeeded", "failed") for state in states):
            return
        assert time.monotonic() < deadline, f"fetches still running: {states}"
        time.sleep(0.05)


def age_links(app, user_id: int, seconds: float = 3600) -> None:
    """Make the user's data older than SOCIAL_DATA_MAX_AGE."""
    past = utcnow() - timedelta(seconds=seconds)
    with app.app_context(), transaction():
        db.session.execute(
            update(SocialLink).where(SocialLink.user_id == user_id).values(last_attempted_at=past, last_fetched_at=past)
        )


def social_data(client, master, user_id: int):
    return client.get(f"/v1/user/{user_id}/social_data", headers=master.headers)


def link_holding_first_fetch(
    client, master, platforms: Platforms, monkeypatch
) -> tuple[int, str, list[tuple], Callable]:
    """A new user linked to a new game-store player, with the first fetch job held back from the worker.

    Returns (user id, steamid, the held `publish_job` calls, the real `publish_job` to release them).
    """
    steamid = new_steamid()
    platforms.game_store.add_player(steamid)
    held: list[tuple] = []
    publish = jobs_service.publish_job
    monkeypatch.setattr(jobs_service, "publish_job", lambda *args: held.append(args) or True)
    user_id = create_user(client, master)
    link(client, master, platforms, user_id, "platform_a", steamid, wait=False)
    return user_id, steamid, held, publish
