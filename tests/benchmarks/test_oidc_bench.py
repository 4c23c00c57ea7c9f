"""OpenID provider benchmarks: the code exchange, the refresh grant and the client_credentials grant
under 32 concurrent connections, and the cost of one RS256 versus one ES256 id_token signature.

The exchange runs against granian (the Procfile's web server: `WEB_CONCURRENCY` workers x
`WEB_THREADS` threads) over real HTTP, on the configured database; codes are issued beforehand, so
each request is exactly one `POST /v1/openidc/token` (client authentication, atomic consumption of
the code, two signatures, the commit). Prints figures; never fails on time. Besides the wall-clock
figures, which other processes on a shared machine distort, it prints the CPU time the server's
processes and the test database's PostgreSQL backends spent per grant. Run on PostgreSQL:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        pytest -m benchmark tests/benchmarks/test_oidc_bench.py -s
"""

from __future__ import annotations

import os
import queue
import statistics
import threading
import time
from datetime import timedelta

import pytest
import requests

from tests.support import environment
from tests.support.bench import cpu_seconds, database_backend_cpu_seconds, free_port, issue_codes, percentile
from tests.support.oidc import make_tenant
from tests.support.servers import web_server

pytestmark = pytest.mark.benchmark

CONCURRENCY = 32
EXCHANGES = int(os.environ.get("OIDC_BENCH_EXCHANGES", 4000))
WARMUP = 200


@pytest.fixture
def web_server_url(app):
    port = free_port()
    url = f"http://localhost:{port}"
    workers = os.environ.get("WEB_CONCURRENCY", str(os.cpu_count() or 2))
    threads = os.environ.get("WEB_THREADS", "2")
    env = {
        **os.environ,
        "OIDC_ISSUER": url,
        "BASE_URL": url,
        "OIDC_TOKEN_RATE_LIMIT": "10000000 per minute",
        "LOG_LEVEL": "WARNING",
        "DB_POOL_SIZE": threads,
    }
    options = ["--workers", workers, "--blocking-threads", threads, "--backlog", "2048"]
    with web_server(port, env, options, log_name="web-oidc-bench.log"):
        yield url, f"{workers} workers x {threads} threads"


def _cpu_snapshot(url: str) -> tuple[float, float]:
    """CPU seconds so far of the server on `url` (main process and workers) and of the database backends."""
    bind = f"--port {url.rsplit(':', 1)[1]} "
    server = cpu_seconds(lambda _group, command: "app.serving" in command and bind in command)
    return server, database_backend_cpu_seconds()


def _code_bodies(tenant, codes: list[str]) -> list[dict]:
    return [
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": tenant.redirect_uri,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        }
        for code in codes
    ]


def _run(url: str, bodies: list[dict], concurrency: int) -> tuple[list[float], float, int, tuple[float, float]]:
    """POST each body to the token endpoint over `concurrency` connections.

    Returns (latencies, seconds, failures, (server CPU ms per request, database CPU ms per request)).
    """
    pending: queue.SimpleQueue[dict] = queue.SimpleQueue()
    for body in bodies:
        pending.put(body)
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    start = threading.Barrier(concurrency + 1)

    def worker() -> None:
        session = requests.Session()
        mine: list[float] = []
        bad = 0
        start.wait()
        while True:
            try:
                body = pending.get_nowait()
            except queue.Empty:
                break
            began = time.perf_counter()
            response = session.post(url + "/v1/openidc/token", timeout=60, data=body)
            mine.append(time.perf_counter() - began)
            bad += response.status_code != 200
        with lock:
            latencies.extend(mine)
            failures[0] += bad

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    start.wait()
    server_before, database_before = _cpu_snapshot(url)
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    server_after, database_after = _cpu_snapshot(url)
    per_request = (
        (server_after - server_before) * 1000 / len(bodies),
        (database_after - database_before) * 1000 / len(bodies),
    )
    return latencies, elapsed, failures[0], per_request


@pytest.mark.parametrize("signing_alg", ["RS256", "ES256"])
def test_code_exchange_throughput(app, client, web_server_url, signing_alg):
    url, shape = web_server_url
    tenant = make_tenant(app, client, signing_alg=signing_alg)
    _run(url, _code_bodies(tenant, issue_codes(app, tenant, WARMUP)), CONCURRENCY)
    bodies = _code_bodies(tenant, issue_codes(app, tenant, EXCHANGES))
    latencies, elapsed, failures, cpu = _run(url, bodies, CONCURRENCY)
    _report(f"code exchange {signing_alg}", shape, latencies, elapsed, failures, cpu)
    assert failures == 0


def _report(
    what: str, shape: str, latencies: list[float], elapsed: float, failures: int, cpu: tuple[float, float]
) -> None:
    database = "postgresql" if environment.USING_POSTGRES else "sqlite"
    print(
        f"\n[oidc bench] {what} on {database}, granian {shape}, {CONCURRENCY} connections: "
        f"{len(latencies)} grants in {elapsed:.2f}s = {len(latencies) / elapsed:.0f} grants/s; "
        f"p50 {statistics.median(latencies) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms; failures {failures} (load generator on the same {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}); CPU per grant: server {cpu[0]:.2f} ms, "
        f"PostgreSQL backends {cpu[1]:.2f} ms"
    )


def _issue_refresh_tokens(app, tenant, count: int) -> list[str]:
    """`count` fresh refresh tokens, each the head of its own family (as after a code exchange)."""
    from app.db import transaction, utcnow
    from app.extensions import db
    from app.oidc import refresh
    from app.tenancy.models import Client

    now = utcnow()
    with app.app_context(), transaction():
        client = db.session.get(Client, tenant.client_id)
        return [
            refresh.add_member(
                client,
                user_id=tenant.user_id,
                scope="openid profile offline_access",
                auth_time=now,
                sid=None,
                family=None,
                family_expires_at=None,
                access_token_jti=f"bench-{index}",
                access_token_expires_at=now + timedelta(hours=1),
            )[0]
            for index in range(count)
        ]


def _refresh_bodies(tenant, refresh_tokens: list[str]) -> list[dict]:
    return [
        {
            "grant_type": "refresh_token",
            "refresh_token": token,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        }
        for token in refresh_tokens
    ]


@pytest.mark.parametrize("signing_alg", ["RS256", "ES256"])
def test_refresh_grant_throughput(app, client, web_server_url, signing_alg):
    """Each request rotates one refresh token: consume, store the next, sign access and id tokens."""
    url, shape = web_server_url
    tenant = make_tenant(app, client, signing_alg=signing_alg)
    _run(url, _refresh_bodies(tenant, _issue_refresh_tokens(app, tenant, WARMUP)), CONCURRENCY)
    bodies = _refresh_bodies(tenant, _issue_refresh_tokens(app, tenant, EXCHANGES))
    latencies, elapsed, failures, cpu = _run(url, bodies, CONCURRENCY)
    _report(f"refresh grant {signing_alg}", shape, latencies, elapsed, failures, cpu)
    assert failures == 0


@pytest.mark.parametrize("signing_alg", ["RS256", "ES256"])
def test_client_credentials_grant_throughput(app, client, web_server_url, signing_alg):
    """Each request authenticates the client (secret) and signs one access token; no database write."""
    from app.db import transaction
    from app.extensions import db
    from app.tenancy.models import Client

    url, shape = web_server_url
    tenant = make_tenant(app, client, signing_alg=signing_alg)
    with app.app_context(), transaction():
        db.session.get(Client, tenant.client_id).client_credentials_scopes = ["reports:read"]
        db.session.get(Client, tenant.client_id).grant_types = ["client_credentials"]
    body = {
        "grant_type": "client_credentials",
        "scope": "reports:read",
        "client_id": str(tenant.client_id),
        "client_secret": tenant.client_secret,
    }
    _run(url, [body] * WARMUP, CONCURRENCY)
    latencies, elapsed, failures, cpu = _run(url, [body] * EXCHANGES, CONCURRENCY)
    _report(f"client_credentials grant {signing_alg}", shape, latencies, elapsed, failures, cpu)
    assert failures == 0


def test_signature_cost_rs256_vs_es256(app, client):
    from app.db import transaction
    from app.oidc import keys, tokens

    rounds = 500
    with app.test_request_context(), transaction():
        for alg in keys.ALGORITHMS:
            keys.signing_key(alg)
    figures = {}
    with app.test_request_context():
        for alg in keys.ALGORITHMS:
            access_token, _ = tokens.issue_access_token(client_id=1, user_id=1, scope="openid", alg=alg)
            began = time.perf_counter()
            for _ in range(rounds):
                tokens.issue_id_token(
                    client_id=1,
                    user_id=1,
                    did="did:tessera:" + "0" * 40,
                    auth_time=0,
                    nonce="n",
                    access_token=access_token,
                    extra_claims={},
                    alg=alg,
                )
            sign = (time.perf_counter() - began) / rounds
            began = time.perf_counter()
            for _ in range(rounds):
                tokens.decode_access_token(access_token)
            verify = (time.perf_counter() - began) / rounds
            figures[alg] = (sign, verify)
            print(f"\n[oidc bench] {alg}: sign id_token {sign * 1e6:.0f} µs, verify access token {verify * 1e6:.0f} µs")
    ratio = figures["RS256"][0] / figures["ES256"][0]
    print(f"[oidc bench] RS256 signing costs {ratio:.1f}x ES256 signing")
