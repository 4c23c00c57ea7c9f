"""Every database call has a deadline (`DB_CALL_TIMEOUT`): a frozen PostgreSQL server or a held SQLite write
lock answers 503 with `Retry-After` in bounded time, through the web server, then the service recovers.

A frozen server accepts connections and acknowledges what it is sent, but never answers (a stopped process, a
paused VM, a stalled disk); the proxy's `blackhole()` is that server, as the web server sees it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import requests
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.extensions import db
from app.ops.database import FREEZE_ARG
from tests.support import environment
from tests.support.bench import free_port
from tests.support.netproxy import TcpProxy
from tests.support.servers import web_server

ADDRESS = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
DEADLINES = {
    "DB_CALL_TIMEOUT": "1", "DB_STATEMENT_TIMEOUT_MS": "800", "DB_CONNECT_TIMEOUT": "1", "DB_POOL_TIMEOUT": "1",
}  # fmt: skip
# With 1 s deadlines: the fast path's call, the view's, a new connection's; the rest is a busy machine's margin.
BOUND_SECONDS = 8.0


def call(url: str, method: str, path: str, **kwargs) -> tuple[requests.Response, float]:
    """The answer and how long it took; a hang fails the test (the timeout is a guard, not the bound)."""
    started = time.monotonic()
    answer = requests.request(method, url + path, timeout=25, **kwargs)
    return answer, time.monotonic() - started


def assert_unavailable_in_time(name: str, answer: requests.Response, seconds: float) -> None:
    assert answer.status_code == 503, (name, answer.status_code, answer.text)
    assert int(answer.headers["Retry-After"]) > 0, name
    assert seconds < BOUND_SECONDS, (name, seconds)


@contextmanager
def server_behind_a_proxy(
    app,
    *,
    deadlines: dict[str, str] = DEADLINES,
    options: tuple[str, ...] = ("--workers", "1", "--blocking-threads", "4"),
    **settings: str,
) -> Iterator[tuple[str, TcpProxy]]:
    """The web server reaching PostgreSQL through a proxy of its own, with `deadlines` (1 s ones unless told)."""
    direct = make_url(os.environ["DIRECT_DATABASE_URL"])
    proxy = TcpProxy(direct.host or "127.0.0.1", direct.port or 5432)
    env = {
        **os.environ, **deadlines, **settings, "REDIS_URL": os.environ["DIRECT_REDIS_URL"],
        "BASE_URL": app.config["BASE_URL"],
        "DATABASE_URL": direct.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False),
    }  # fmt: skip
    try:
        with web_server(free_port(), env, list(options), log_name="frozen-database-server.log") as url:
            yield url, proxy
    finally:
        proxy.restore()


@pytest.fixture
def frozen_database_server(app):
    with server_behind_a_proxy(app) as server:
        yield server


@pytest.mark.realworker
def test_a_frozen_postgresql_answers_503_with_retry_after_within_the_deadline(app, master, frozen_database_server):
    url, proxy = frozen_database_server
    child = requests.post(f"{url}/v1/sub_client", json={"name": "Frozen child"}, headers=master.headers, timeout=30)
    assert child.status_code == 201, child.text
    job = requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30)
    assert job.status_code == 202, job.text
    calls = {
        "readyz": ("GET", "/readyz", {}),
        "api read": ("GET", f"/v1/jobs/{job.json()['data']['id']}", {"headers": master.headers}),
        "challenge": ("POST", "/api/auth/challenge", {"json": {"address": ADDRESS}}),
        "sub-client fast read": (
            "GET", f"/v1/sub_client/{child.json()['data']['client_id']}", {"headers": master.headers}
        ),
    }  # fmt: skip
    for name, (method, path, kwargs) in calls.items():  # every pool holds a live connection when the server freezes
        assert call(url, method, path, **kwargs)[0].status_code == 200, name

    proxy.blackhole()
    try:
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            during = {name: pool.submit(call, url, method, path, **kwargs)
                      for name, (method, path, kwargs) in calls.items()}  # fmt: skip
            answers = [(name, *future.result()) for name, future in during.items()]
        # Once the server is known silent, a burst is refused at once, not a deadline after another.
        with ThreadPoolExecutor(max_workers=2 * len(calls)) as pool:
            burst = [(name, pool.submit(call, url, method, path, **kwargs))
                     for name, (method, path, kwargs) in [*calls.items(), *calls.items()]]  # fmt: skip
            then = [(name, *future.result()) for name, future in burst]
    finally:
        proxy.restore()

    for name, answer, seconds in [*answers, *then]:
        assert_unavailable_in_time(name, answer, seconds)
    at_once = [name for name, _answer, seconds in then if seconds < 0.5]
    assert len(at_once) >= len(then) - 2, then  # one probe of the server at a time may wait its deadline
    deadline = time.monotonic() + 30
    for name, (method, path, kwargs) in calls.items():
        while (status := call(url, method, path, **kwargs)[0].status_code) != 200:
            assert time.monotonic() < deadline, f"{name} did not recover after the freeze: {status}"
            time.sleep(0.2)


# The bound: no request held longer by a frozen database (it learns within `DB_FREEZE_SECONDS`).
FROZEN_BOUND_SECONDS = 5.0


def requests_spread_over(url: str, calls: list[tuple[str, str, str, dict]], seconds: float) -> list[tuple]:
    """Each of `calls` (name, method, path, options) sent at its own moment over `seconds`, all at once in flight;
    (name, answer, seconds it took) for each."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = []
        for index, (name, method, path, kwargs) in enumerate(calls):
            futures.append((name, pool.submit(call, url, method, path, **kwargs)))
            if index < len(calls) - 1:
                time.sleep(seconds / (len(calls) - 1))
        return [(name, *future.result()) for name, future in futures]


@pytest.mark.realworker
def test_a_frozen_postgresql_is_told_from_a_slow_statement_and_holds_no_request_long(app, master):
    """With the production deadlines and the Procfile's two workers of two threads: a statement slower than
    `DB_FREEZE_SECONDS` is waited for, and a frozen server answers every request, queued ones included, with 503
    within the issue's 5 s, `/readyz` and the hot fast read among them."""
    procfile_shape = ["--workers", "2", "--blocking-threads", "2"]
    with server_behind_a_proxy(app, deadlines={}, options=procfile_shape) as (url, proxy):
        child = requests.post(f"{url}/v1/sub_client", json={"name": "Slow child"}, headers=master.headers, timeout=30)
        assert child.status_code == 201, child.text
        job = requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30)
        assert job.status_code == 202, job.text
        job_path = f"/v1/jobs/{job.json()['data']['id']}"
        calls = [
            ("readyz", "GET", "/readyz", {}),
            ("api read", "GET", job_path, {"headers": master.headers}),
            ("fast read", "GET", f"/v1/sub_client/{child.json()['data']['client_id']}", {"headers": master.headers}),
            ("job start", "POST", "/v1/jobs/canary", {"json": {}, "headers": master.headers}),
            ("challenge", "POST", "/api/auth/challenge", {"json": {"address": ADDRESS}}),
        ]
        for _round in range(4):  # both web workers hold live connections in every pool
            for name, method, path, kwargs in calls:
                assert call(url, method, path, **kwargs)[0].status_code < 300, name

        with app.app_context(), db.engine.connect() as holder:
            holder.execute(text("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"))  # a read waits on it: a slow statement
            with ThreadPoolExecutor(max_workers=1) as pool:
                slow = pool.submit(call, url, "GET", job_path, headers=master.headers)
                time.sleep(app.config["SQLALCHEMY_ENGINE_OPTIONS"]["connect_args"][FREEZE_ARG] + 1.5)
                holder.rollback()
                slow_answer, slow_seconds = slow.result()
        assert slow_answer.status_code == 200, slow_answer.text

        proxy.blackhole()
        try:
            answers = requests_spread_over(url, calls * 3, seconds=10)  # 15 requests on 4 threads over 10 s
        finally:
            proxy.restore()
        deadline = time.monotonic() + 30
        for name, method, path, kwargs in calls:
            while (status := call(url, method, path, **kwargs)[0].status_code) >= 300:
                assert time.monotonic() < deadline, f"{name} did not recover after the freeze: {status}"
                time.sleep(0.2)

    print("SLOW", slow_seconds, [(n, a.status_code, round(s, 2)) for n, a, s in answers])
    for name, answer, seconds in answers:
        assert answer.status_code == 503, (name, answer.status_code, answer.text)
        assert int(answer.headers["Retry-After"]) > 0, name
        assert seconds < FROZEN_BOUND_SECONDS, (name, seconds, [(n, round(s, 1)) for n, _a, s in answers])


@pytest.mark.realworker
def test_the_session_and_pre_dispatch_engines_connections_carry_the_deadlines(app):
    from sqlalchemy import text

    from app.db import statement_engine
    from app.extensions import db
    from app.ops.database import DeadlineConnection

    with app.app_context():
        engines = {"session": db.engine, "pre-dispatch": statement_engine(app)}
    for name, engine in engines.items():
        with engine.connect() as connection:
            driver = connection.connection.driver_connection
            statement_timeout = connection.execute(text("SHOW statement_timeout")).scalar()
        assert isinstance(driver, DeadlineConnection) and driver.call_timeout > 0, name
        assert statement_timeout not in ("0", "0ms"), name


@pytest.mark.realworker
def test_a_request_waiting_for_a_pooled_connection_answers_503_at_the_pool_timeout(app, master):
    # One connection, held by a request the frozen server never answers (3 s); the next waits 0.3 s for it.
    with server_behind_a_proxy(app, DB_POOL_SIZE="1", DB_MAX_OVERFLOW="0", DB_POOL_TIMEOUT="0.3",
                               DB_CALL_TIMEOUT="3") as (url, proxy):  # fmt: skip
        job = requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30)
        assert job.status_code == 202, job.text
        path = f"/v1/jobs/{job.json()['data']['id']}"
        proxy.blackhole()
        with ThreadPoolExecutor(max_workers=2) as pool:
            holder = pool.submit(call, url, "GET", path, headers=master.headers)
            time.sleep(0.5)
            waiter, seconds = call(url, "GET", path, headers=master.headers)
            held, held_seconds = holder.result()
    assert_unavailable_in_time("waiting for the pool", waiter, seconds)
    assert seconds < 2.5, seconds  # the pool's timeout, not the call deadline of the request holding it
    assert_unavailable_in_time("holding the connection", held, held_seconds)


@pytest.fixture
def sqlite_server(app):
    """The web server on the run's SQLite database with a 1 s busy timeout."""
    env = {**os.environ, **DEADLINES, "BASE_URL": app.config["BASE_URL"]}
    with web_server(free_port(), env, ["--workers", "1", "--blocking-threads", "2"], log_name="sqlite-lock.log") as url:
        yield url


@pytest.mark.skipif(environment.USING_POSTGRES, reason="SQLite's write lock")
def test_a_held_sqlite_write_lock_answers_503_with_retry_after_within_the_deadline(app, master, sqlite_server):
    url = sqlite_server
    job = requests.post(f"{url}/v1/jobs/canary", json={}, headers=master.headers, timeout=30)
    assert job.status_code == 202, job.text
    holder = sqlite3.connect(make_url(os.environ["DATABASE_URL"]).database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock, as a long writer would
    try:
        answers = {
            "write": call(url, "POST", "/v1/jobs/canary", json={}, headers=master.headers),
            "read": call(url, "GET", f"/v1/jobs/{job.json()['data']['id']}", headers=master.headers),
        }
    finally:
        holder.rollback()
        holder.close()
    for name, (answer, seconds) in answers.items():
        assert_unavailable_in_time(name, answer, seconds)
        assert answer.json()["code"] == "service_unavailable"
    assert call(url, "POST", "/v1/jobs/canary", json={}, headers=master.headers)[0].status_code == 202
