"""Availability under dependency faults on PostgreSQL + Redis: answers degrade, never hang or 500.

The web side reaches PostgreSQL and Redis through loopback proxies (see tests/support/environment.py) that these
tests cut or blackhole.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.support import environment
from tests.support.config import config_changed

pytestmark = pytest.mark.realworker

ADDRESS = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


def test_rate_limited_endpoints_fall_back_to_in_process_limits_without_redis(app, client):
    environment.REDIS_PROXY.cut()
    try:
        token = client.post(
            "/v1/openidc/token", data={"grant_type": "authorization_code", "client_id": "nobody", "code": "x"}
        )
        challenge = client.post("/api/auth/challenge", json={"address": ADDRESS})
        login = client.post("/v1/openidc/login", data={"request": "unknown", "email": "a@example.org"})
    finally:
        environment.REDIS_PROXY.restore()
    assert token.status_code == 400, token.get_data(as_text=True)
    assert token.get_json()["error"] == "invalid_request"
    assert challenge.status_code == 200, challenge.get_data(as_text=True)
    assert ADDRESS in challenge.get_json()["data"]["message"]
    assert login.status_code not in (429, 500) and login.status_code < 500


def test_in_process_limits_still_refuse_a_flood_while_redis_is_down(app, client):
    with config_changed(app, AGENT_CHALLENGE_RATE_LIMIT="3 per minute"):
        environment.REDIS_PROXY.cut()
        try:
            statuses = [
                client.post(
                    "/api/auth/challenge", json={"address": ADDRESS}, environ_base={"REMOTE_ADDR": "10.9.8.7"}
                ).status_code
                for _ in range(5)
            ]
        finally:
            environment.REDIS_PROXY.restore()
    assert statuses == [200, 200, 200, 429, 429]


def test_the_sign_in_limit_per_network_holds_in_process_while_redis_is_down(app, client):
    with config_changed(app, OIDC_LOGIN_RATE_LIMIT="3 per minute"):
        environment.REDIS_PROXY.cut()
        try:
            statuses = [
                client.post(
                    "/v1/openidc/login", data={"request": "unknown", "email": "a@example.org"},
                    environ_base={"REMOTE_ADDR": "10.9.8.6"},
                ).status_code
                for _ in range(5)
            ]  # fmt: skip
        finally:
            environment.REDIS_PROXY.restore()
    assert all(status < 500 and status != 429 for status in statuses[:3]), statuses
    assert statuses[3:] == [429, 429]


def test_social_claims_and_budgets_fall_back_to_this_process_without_redis():
    from app.social.budget import CallBudget, Rate
    from app.social.locks import ShortClaims

    url = os.environ["REDIS_URL"]
    claims = ShortClaims(url, key_prefix=f"test-claims-{environment.RUN_ID}")
    budget = CallBudget({"platform_x": [Rate(2, 60)]}, redis_url=url, key_prefix=f"test-budget-{environment.RUN_ID}")
    environment.REDIS_PROXY.cut()
    try:
        assert claims.claim("fetch:1", 30) is True
        assert claims.claim("fetch:1", 30) is False
        claims.release("fetch:1")
        assert claims.claim("fetch:1", 30) is True
        assert budget.acquire("platform_x") == 0.0
        assert budget.acquire("platform_x") == 0.0
        assert budget.acquire("platform_x") > 0
    finally:
        environment.REDIS_PROXY.restore()


def answered_during(pool, call, *args, **kwargs):
    """`call`'s answer, with a hang guard (not a timing): a call that never returns fails the test."""
    return pool.submit(call, *args, **kwargs).result(timeout=60)


def test_rate_limited_endpoints_answer_while_redis_accepts_but_never_answers(app, client):
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    environment.REDIS_PROXY.blackhole()
    try:
        token = answered_during(
            pool, client.post, "/v1/openidc/token",
            data={"grant_type": "authorization_code", "client_id": "nobody", "code": "x"},
        )  # fmt: skip
        challenges = [
            answered_during(pool, client.post, "/api/auth/challenge", json={"address": ADDRESS}) for _ in range(2)
        ]
        login = answered_during(pool, client.post, "/v1/openidc/login", data={"request": "unknown", "email": "a@b.org"})
        login_code = answered_during(pool, client.post, "/v1/openidc/login/code", data={"request": "x", "code": "1"})
    finally:
        environment.REDIS_PROXY.restore()
        pool.shutdown(wait=False)
    assert token.status_code == 400, token.get_data(as_text=True)
    assert token.get_json()["error"] == "invalid_request"
    for challenge in challenges:
        assert challenge.status_code == 200, challenge.get_data(as_text=True)
        assert ADDRESS in challenge.get_json()["data"]["message"]
    for page in (login, login_code):
        assert page.status_code < 500 and page.status_code != 429, page.get_data(as_text=True)


def test_social_claims_and_budgets_fall_back_to_this_process_while_redis_never_answers():
    from concurrent.futures import ThreadPoolExecutor

    from app.social.budget import CallBudget, Rate
    from app.social.locks import ShortClaims

    url = os.environ["REDIS_URL"]
    claims = ShortClaims(url, key_prefix=f"test-claims-bh-{environment.RUN_ID}")
    budget = CallBudget({"platform_y": [Rate(2, 60)]}, redis_url=url, key_prefix=f"test-budget-bh-{environment.RUN_ID}")
    pool = ThreadPoolExecutor(max_workers=1)
    environment.REDIS_PROXY.blackhole()
    try:
        assert answered_during(pool, claims.claim, "fetch:2", 30) is True
        assert answered_during(pool, claims.claim, "fetch:2", 30) is False
        answered_during(pool, claims.release, "fetch:2")
        assert answered_during(pool, claims.claim, "fetch:2", 30) is True
        assert answered_during(pool, budget.acquire, "platform_y") == 0.0
        assert answered_during(pool, budget.acquire, "platform_y") == 0.0
        assert answered_during(pool, budget.acquire, "platform_y") > 0
    finally:
        environment.REDIS_PROXY.restore()
        pool.shutdown(wait=False)


def test_readyz_answers_503_at_its_deadline_during_a_database_partition(app, client):
    from concurrent.futures import ThreadPoolExecutor

    # Ready first (a busy machine may need a few probes), so the partition is what the probe meets.
    deadline = time.monotonic() + 30
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "readyz not ready before the partition"
        time.sleep(0.2)
    pool = ThreadPoolExecutor(max_workers=1)
    environment.DB_PROXY.blackhole()
    try:
        first = pool.submit(client.get, "/readyz").result(timeout=30)  # a hang guard, not a timing
        second = pool.submit(client.get, "/readyz").result(timeout=30)
    finally:
        environment.DB_PROXY.restore()
        pool.shutdown(wait=False)
    for ready in (first, second):
        assert ready.status_code == 503
        # Its deadline, or the database found frozen (`DB_FREEZE_SECONDS`) before it.
        assert ready.get_json()["checks"]["database"] in ("timeout", "unreachable")
        assert int(ready.headers["Retry-After"]) > 0
    deadline = time.monotonic() + 30
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "readyz did not recover after the partition"
        time.sleep(0.2)


def test_database_connections_carry_keepalives_a_tcp_user_timeout_and_a_statement_timeout(app):
    from sqlalchemy import text

    from app.extensions import db

    with app.app_context(), db.engine.connect() as connection:
        parameters = connection.connection.driver_connection.info.get_parameters()
        statement_timeout = connection.execute(text("SHOW statement_timeout")).scalar()
    assert parameters["keepalives"] == "1"
    assert int(parameters["tcp_user_timeout"]) > 0
    assert int(parameters["keepalives_idle"]) > 0
    assert statement_timeout not in ("0", "0ms")


@pytest.fixture
def short_statement_server(app):
    """The application under the web server on the session's database with a 300 ms statement timeout."""
    from tests.support.bench import free_port
    from tests.support.servers import web_server

    env = {
        **os.environ, "DATABASE_URL": os.environ["DIRECT_DATABASE_URL"], "REDIS_URL": os.environ["DIRECT_REDIS_URL"],
        "BASE_URL": app.config["BASE_URL"], "DB_STATEMENT_TIMEOUT_MS": "300",
    }  # fmt: skip
    with web_server(free_port(), env, ["--workers", "1"], log_name="statement-timeout-server.log") as url:
        yield url


def test_a_statement_cancelled_by_the_statement_timeout_answers_503(app, master, short_statement_server):
    import requests
    from sqlalchemy import text

    from app.extensions import db

    url = short_statement_server
    job = requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30)
    assert job.status_code == 202, job.text
    job_url = f"{url}/v1/jobs/{job.json()['data']['id']}"
    with app.app_context(), db.engine.connect() as holder:
        # Another transaction holds the jobs table: a write waits on it, then a read too.
        holder.execute(text("LOCK TABLE jobs IN EXCLUSIVE MODE"))
        write = requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30)
        holder.execute(text("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"))
        read = requests.get(job_url, headers=master.headers, timeout=30)
        holder.rollback()
    for answer in (write, read):
        assert answer.status_code == 503, answer.text
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        assert answer.json()["code"] == "service_unavailable"
        assert int(answer.headers["Retry-After"]) > 0
    assert requests.get(job_url, headers=master.headers, timeout=30).status_code == 200
    assert requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30).status_code == 202
