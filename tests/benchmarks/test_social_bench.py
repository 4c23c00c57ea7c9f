"""Refreshing 1,000 linked users against the fake platforms with two worker processes.

Prints wall time, calls per platform and the peak calls any one-second window saw at each fake,
next to that platform's limit (the fakes refuse calls beyond it, counted as quota refusals).
Never fails on time. Run: DATABASE_URL=... REDIS_URL=... pytest -m benchmark
tests/benchmarks/test_social_bench.py -s
"""

from __future__ import annotations

import secrets
import time

import pytest
from sqlalchemy import func, select

from app.db import transaction, utcnow
from app.extensions import db
from app.jobs.models import Job
from app.social import service
from app.social.connectors import TokenSet
from app.social.models import SocialLink
from app.tenancy.caller import Caller
from app.tenancy.models import Client
from app.users.service import create_user
from tests.support import environment
from tests.support.config import set_settings
from tests.support.social_fakes import FakeChat, FakeGameStore, FakeStreaming

pytestmark = [pytest.mark.benchmark, pytest.mark.realworker]

USERS = 1000
# Per-second limits the fakes enforce (below what two workers would otherwise send, so the budget
# binds), and the shared budget we give the service: 90 % of each, so that network jitter between
# our budget's clock and the platforms' arrival times never tips a window over the limit. Calls
# above 3 per user are fetches restarted after the budget ran out halfway through one.
PLATFORM_LIMITS = {"platform_a": 40, "platform_b": 30, "platform_c": 40}
BUDGET_SHARE = 0.9


def _budgets() -> str:
    return ";".join(f"{name}={int(limit * BUDGET_SHARE)}/1" for name, limit in PLATFORM_LIMITS.items())


def _link_users(app, master_id: int, fakes: tuple[FakeGameStore, FakeChat, FakeStreaming]) -> None:
    game_store, chat, streaming = fakes
    with app.app_context(), transaction():
        client = db.session.get(Client, master_id)
        caller = Caller(
            client_id=client.id,
            token_id=0,
            is_master=True,
            root_id=client.id,
            path=client.path,
            acting_client_id=client.id,
            acting_path=client.path,
        )
        for index in range(USERS):
            user = create_user(caller, {"email_address": f"bench-{index}-{secrets.token_hex(4)}@example.org"})
            db.session.flush()
            steamid, account = f"765611980{index:08d}", f"{700000 + index}"
            game_store.add_player(steamid)
            chat.add_user(account, guild_count=5)
            streaming.add_user(account, followed_count=20)
            db.session.add(
                SocialLink(
                    user_id=user.id,
                    client_id=client.id,
                    platform="platform_a",
                    account_id=steamid,
                    status="linked",
                    linked_at=utcnow(),
                )
            )
            for platform, fake in (("platform_b", chat), ("platform_c", streaming)):
                oauth_link = SocialLink(
                    user_id=user.id,
                    client_id=client.id,
                    platform=platform,
                    account_id=account,
                    status="linked",
                    linked_at=utcnow(),
                )
                service.store_tokens(oauth_link, TokenSet.from_token_response(fake.issue_tokens(account)))
                db.session.add(oauth_link)


def _wait_for_jobs(app, since, expected: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        with app.app_context():
            rows = db.session.execute(
                select(Job.state, func.count())
                .where(Job.kind == "social.fetch", Job.created_at >= since)
                .group_by(Job.state)
            ).all()
            db.session.rollback()
        states = dict(rows)
        if states.get("succeeded", 0) + states.get("failed", 0) >= expected:
            return states
        assert time.monotonic() < deadline, f"refresh did not finish: {states}"
        time.sleep(0.2)


def _attempt_counts(app, since) -> tuple[int, int]:
    with app.app_context():
        total = db.session.scalar(
            select(func.sum(Job.attempts)).where(Job.kind == "social.fetch", Job.created_at >= since)
        )
        fetched = db.session.scalar(
            select(func.count()).select_from(SocialLink).where(SocialLink.last_fetched_at >= since)
        )
        db.session.rollback()
    return int(total or 0), int(fetched or 0)


def test_refresh_thousand_linked_users(app, master, real_worker):
    fakes = (FakeGameStore().start(), FakeChat().start(), FakeStreaming().start())
    game_store, chat, streaming = fakes
    for fake, platform in zip(fakes, PLATFORM_LIMITS, strict=True):
        fake.set_quota(PLATFORM_LIMITS[platform], 1.0)
        fake.response_delay = 0.002
    env = {
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
        "SOCIAL_BUDGETS": _budgets(),
    }
    _link_users(app, master.client_id, fakes)
    real_worker.stop()
    workers = [environment.start_worker(concurrency=1, extra_env=env) for _ in range(2)]
    try:
        since = utcnow()
        started = time.monotonic()
        with app.app_context(), transaction():
            set_settings(app, SOCIAL_BUDGETS=env["SOCIAL_BUDGETS"])
            jobs = service.schedule_stale_refreshes(limit=3 * USERS)
        states = _wait_for_jobs(app, since, jobs, timeout=900)
        wall = time.monotonic() - started
        attempts, fetched = _attempt_counts(app, since)
    finally:
        for process in workers:
            environment.stop_process(process)
        real_worker.start()
        app.config.pop("SOCIAL_BUDGETS", None)
        for fake in fakes:
            fake.stop()

    print(f"\nsocial refresh: {USERS} users, {jobs} fetch jobs on 2 worker processes (PostgreSQL + Redis)")
    print(
        f"  wall time {wall:.1f} s, {jobs / wall:.0f} jobs/s; job states {states}; "
        f"{attempts - jobs} re-schedules (budget waits); {fetched} links fetched"
    )
    for fake, platform in zip(fakes, PLATFORM_LIMITS, strict=True):
        print(
            f"  {platform}: {fake.api_calls} API calls, peak {fake.peak_calls(1.0)} in any 1 s "
            f"(budget {int(PLATFORM_LIMITS[platform] * BUDGET_SHARE)}/s, platform limit "
            f"{PLATFORM_LIMITS[platform]}/s), refused by the platform: {fake.quota_refusals}"
        )
    assert states.get("failed", 0) == 0
    assert fetched == jobs == 3 * USERS
    assert all(fake.quota_refusals == 0 for fake in fakes)
