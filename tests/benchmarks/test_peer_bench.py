"""Side by side with peers, interleaved rounds, medians of 3: the code exchange against
node-oidc-provider (and the floor of the same work on Tessera's stack, peers/exchange_floor.py,
served by the Procfile's web line), public reads against nginx, jobs against a bare Celery no-op
task, and eddsa-rdfc-2022 verification over HTTP against Digital Bazaar's verifier (`@digitalbazaar/vc`,
pinned in peers/vc/package-lock.json), one request at a time.

Load comes from `wrk` (compiled; a Lua script posts one fresh code per request), never from Python.
Servers run as deployed: Tessera under the Procfile's web line on PostgreSQL + Redis,
node-oidc-provider (pinned in peers/oidc/package-lock.json, installed with `npm ci` into a temporary
directory) with a Redis adapter. Each side's exchange does the same work: codes a browser sign-in
left (a session whose sid the code carries, a PKCE S256 challenge) redeemed by a client
authenticating with client_secret_basic. CPU per request is read from /proc for the server processes
(granian main process and workers, the node process) and, on both sides alike, the test database's
PostgreSQL backends and the Redis server. Prints figures; never fails on time.
`wrk` and `nginx` are installed from Debian when missing.

Run: DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
     pytest -m benchmark tests/benchmarks/test_peer_bench.py -s
"""

from __future__ import annotations

import base64
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote_plus, urlencode

import httpx
import pytest

from tests.support import environment
from tests.support.bench import (
    REPO_ROOT,
    bare_celery_round,
    database_backend_cpu_seconds,
    enqueue_canaries,
    ensure_binary,
    free_port,
    group_cpu_seconds,
    issue_signed_in_codes,
    nginx_config,
    redis_cpu_seconds,
    run_wrk,
    seed_card,
    server_cpu_seconds,
    server_env,
    start_bare_celery_workers,
    start_procfile_web,
    static_public_reads_server,
    wait_finished,
    wait_for_url,
)
from tests.support.environment import stop_process
from tests.support.tenancy import make_master

pytestmark = [pytest.mark.benchmark, pytest.mark.realworker]

PEER_DIR = Path(__file__).resolve().parent / "peers" / "oidc"
# The floor of a code exchange on Tessera's stack, served as the Procfile serves the app.
EXCHANGE_FLOOR = "tests.benchmarks.peers.exchange_floor:create"
VC_PEER_DIR = PEER_DIR.parent / "vc"
ROUNDS = 3
EXCHANGE_SECONDS = int(os.environ.get("PEER_BENCH_SECONDS", 5))
READ_SECONDS = 5
WRK_POST = """
local counter = 0
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end
function init(args)
  requests = {}
  for line in io.lines(args[1] .. "." .. id) do
    local authorization, body = line:match("^([^\t]*)\t(.*)$")
    local headers = {["Content-Type"] = "application/x-www-form-urlencoded"}
    if authorization ~= "" then headers["Authorization"] = authorization end
    requests[#requests + 1] = wrk.format("POST", nil, headers, body)
  end
  index = 0
end
function request()
  index = index + 1
  return requests[index] or requests[#requests]
end
"""
WRK_THREADS = 2
# The client peers/oidc/provider.mjs registers (client_secret_basic).
NODE_CLIENT = {
    "redirect_uri": "https://rp.example/callback",
    "client_id": "bench",
    "client_secret": "bench-secret-0123456789abcdef0123456789abcdef",
}


def _basic(client_id: str, secret: str) -> str:
    """RFC 6749 §2.3.1: both parts form-encoded, then Basic."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def _exchange_line(authorization: str, parameters: dict) -> str:
    """One line of the wrk script's input: the Authorization header, a tab, the form body."""
    return f"{authorization}\t{urlencode(parameters)}"


def _wrk(
    wrk: str,
    url: str,
    connections: int,
    seconds: int,
    script: Path | None = None,
    script_args: list[str] | None = None,
    headers: dict | None = None,
    server_pid: int | None = None,
) -> dict:
    """One wrk round; CPU per request of the server and, on both sides alike, of the test database's
    PostgreSQL backends and the Redis server (`cpu_ms` is the sum, each part beside it)."""
    before = _stores_cpu_seconds()
    server_before = server_cpu_seconds(server_pid) if server_pid else 0.0
    row = run_wrk(
        url, connections, seconds, script=script, script_args=script_args, headers=headers, threads=WRK_THREADS
    )
    server = (server_cpu_seconds(server_pid) - server_before) if server_pid else 0.0
    postgres, redis = (after - earlier for after, earlier in zip(_stores_cpu_seconds(), before, strict=True))
    per_request = (lambda seconds: seconds * 1000 / row["requests"]) if row["requests"] else (lambda _: float("nan"))
    row.update(server_ms=per_request(server), postgres_ms=per_request(postgres), redis_ms=per_request(redis))
    row["cpu_ms"] = row["server_ms"] + row["postgres_ms"] + row["redis_ms"]
    return row


def _stores_cpu_seconds() -> tuple[float, float]:
    return database_backend_cpu_seconds(), redis_cpu_seconds()


def _median(rounds: list[dict]) -> dict:
    return {key: statistics.median(row[key] for row in rounds) for key in rounds[0]}


def _print_pair(label: str, ours: dict, theirs: dict, peer: str, name: str = "tessera") -> None:
    print(
        f"{label:<28}{'server':<22}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU ms/req':>12}"
        f"{'(server':>9}{'PG':>7}{'Redis)':>8}{'failed':>8}"
    )
    for side, row in ((name, ours), (peer, theirs)):
        print(
            f"{'':<28}{side:<22}{row['rps']:>9.0f}{row['p50']:>9.1f}{row['p99']:>9.1f}{row['cpu_ms']:>12.2f}"
            f"{row['server_ms']:>9.2f}{row['postgres_ms']:>7.2f}{row['redis_ms']:>8.2f}{row['failed']:>8.0f}"
        )
    print(
        f"{'':<28}ratio {name}/{peer}: throughput {ours['rps'] / theirs['rps']:.2f}, "
        f"CPU per request {ours['cpu_ms'] / theirs['cpu_ms']:.2f}x (server, PostgreSQL and Redis counted on both sides)"
    )


@pytest.fixture
def peer_workdir():
    workdir = Path(tempfile.mkdtemp(prefix="tessera-peer-bench-"))
    yield workdir
    shutil.rmtree(workdir, ignore_errors=True)


def _needs_postgres() -> None:
    if not environment.USING_POSTGRES or not os.environ.get("REDIS_URL"):
        pytest.skip("the side-by-side benchmark runs Tessera on PostgreSQL + Redis")


# -- code exchange -------------------------------------------------------------------------


def _write_bodies(path: Path, bodies: list[str]) -> None:
    for thread in range(WRK_THREADS):
        Path(f"{path}.{thread}").write_text("\n".join(bodies[thread::WRK_THREADS]) + "\n")


def _tessera_codes(app, tenant, count: int) -> list[str]:
    """Exchanges of codes a browser sign-in left (PKCE, the session's sid), client_secret_basic."""
    authorization = _basic(str(tenant.client_id), tenant.client_secret)
    return [
        _exchange_line(
            authorization,
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": tenant.redirect_uri,
                "code_verifier": verifier,
            },
        )
        for code, verifier in issue_signed_in_codes(app, tenant, count)
    ]


def _node_env(jwt_access_tokens: bool) -> dict:
    return {**os.environ, "PEER_JWT_ACCESS_TOKENS": "1" if jwt_access_tokens else "0"}


def _node_codes(workdir: Path, redis_url: str, count: int, jwt_access_tokens: bool = False) -> list[str]:
    codes = subprocess.run(
        ["node", "provider.mjs", "mint", str(count), redis_url],
        cwd=workdir,
        env=_node_env(jwt_access_tokens),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    authorization = _basic(NODE_CLIENT["client_id"], NODE_CLIENT["client_secret"])
    return [
        _exchange_line(
            authorization,
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": NODE_CLIENT["redirect_uri"],
                "code_verifier": verifier,
            },
        )
        for code, verifier in (line.split() for line in codes if line)
    ]


def _npm_ci(peer: Path, workdir: Path) -> None:
    for source in peer.iterdir():
        shutil.copy(source, workdir / source.name)
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=workdir,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _install_peer(workdir: Path) -> None:
    _npm_ci(PEER_DIR, workdir)
    key = subprocess.run(
        [
            "node",
            "-e",
            "const c=require('crypto');const k=c.generateKeyPairSync('rsa',{modulusLength:2048})"
            ".privateKey.export({format:'jwk'});console.log(JSON.stringify({...k,kid:'bench',use:'sig',alg:'RS256'}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (workdir / "key.json").write_text(key)


def test_code_exchange_vs_node_oidc_provider(app, client, peer_workdir):
    from tests.support.oidc import make_tenant

    _needs_postgres()
    wrk = ensure_binary("wrk", "wrk")
    _install_peer(peer_workdir)
    redis_url = server_env()["REDIS_URL"].rsplit("/", 1)[0] + "/15"
    script = peer_workdir / "post.lua"
    script.write_text(WRK_POST)
    connections = 32
    budget = EXCHANGE_SECONDS * 3000  # more codes than either server can spend in a round

    tessera_port, node_port, node_jwt_port = free_port(), free_port(), free_port()
    # The limiter stays on the path (same Redis round trip per request) with a limit no round reaches:
    # a 429 answered in a fraction of an exchange's time would inflate the figures.
    tessera = start_procfile_web(tessera_port, {"OIDC_TOKEN_RATE_LIMIT": "10000000 per minute"})
    # The floor of the same work on Tessera's stack (peers/exchange_floor.py), served the same way.
    floor_port = free_port()
    floor = start_procfile_web(floor_port, {}, target=EXCHANGE_FLOOR, ready_path="/")
    # As configured by default (opaque access tokens kept in Redis: one signature per exchange), and
    # with RS256 JWT access tokens (RFC 9068), the work Tessera does (two signatures).
    nodes = {
        jwt: subprocess.Popen(
            ["node", "provider.mjs", "serve", str(port), redis_url, "key.json"],
            cwd=peer_workdir,
            env=_node_env(jwt),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for jwt, port in ((False, node_port), (True, node_jwt_port))
    }
    try:
        for jwt, port in ((False, node_port), (True, node_jwt_port)):
            wait_for_url(f"http://127.0.0.1:{port}/.well-known/openid-configuration", nodes[jwt], timeout=60)
        tenant = make_tenant(app, client)
        _check_floor_redeems(f"http://127.0.0.1:{floor_port}/", _tessera_codes(app, tenant, 1)[0])
        ours, floors, theirs, theirs_jwt = [], [], [], []
        for _ in range(ROUNDS):
            for url, server, rows in (
                (f"http://127.0.0.1:{tessera_port}/v1/openidc/token", tessera, ours),
                (f"http://127.0.0.1:{floor_port}/", floor, floors),
            ):
                _write_bodies(peer_workdir / "tessera", _tessera_codes(app, tenant, budget))
                rows.append(
                    _wrk(
                        wrk,
                        url,
                        connections,
                        EXCHANGE_SECONDS,
                        script,
                        [str(peer_workdir / "tessera")],
                        server_pid=server.pid,
                    )
                )
            for jwt, port, rows in ((False, node_port, theirs), (True, node_jwt_port, theirs_jwt)):
                _write_bodies(peer_workdir / "node", _node_codes(peer_workdir, redis_url, budget, jwt))
                rows.append(
                    _wrk(
                        wrk,
                        f"http://127.0.0.1:{port}/token",
                        connections,
                        EXCHANGE_SECONDS,
                        script,
                        [str(peer_workdir / "node")],
                        server_pid=nodes[jwt].pid,
                    )
                )
        print(
            f"\n[peer bench] code exchange (RS256 id_token), {connections} connections, {EXCHANGE_SECONDS} s "
            f"rounds x {ROUNDS} interleaved, medians; load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} CPUs"
        )
        _print_pair("POST token (code grant)", _median(ours), _median(theirs), "node-oidc-provider")
        _print_pair("  node: JWT access tokens", _median(ours), _median(theirs_jwt), "node-oidc-provider JWT")
        _print_pair("  the floor of the work", _median(floors), _median(theirs_jwt), "node-oidc-provider JWT", "floor")
        assert not any(row["failed"] for row in floors), "the floor refused exchanges: its figures do not count"
    finally:
        stop_process(floor)
        for node in nodes.values():
            stop_process(node)
        stop_process(tessera)
        _forget_node_codes(redis_url)


def _check_floor_redeems(url: str, line: str) -> None:
    """The floor answers a code with both tokens, and refuses the same code again (it was consumed)."""
    authorization, body = line.split("\t", 1)
    headers = {"Authorization": authorization, "Content-Type": "application/x-www-form-urlencoded"}
    first = httpx.post(url, content=body, headers=headers)
    assert first.status_code == 200, first.text
    assert {"access_token", "id_token"} <= first.json().keys()
    again = httpx.post(url, content=body, headers=headers)
    assert again.status_code == 400 and again.json() == {"error": "invalid_grant"}


def _forget_node_codes(redis_url: str) -> None:
    """Delete what the node peers stored (their keys carry provider.mjs's `oidc-peer:` prefix)."""
    import redis

    with redis.Redis.from_url(redis_url) as store:
        batch = []
        for key in store.scan_iter(match="oidc-peer:*", count=5000):
            batch.append(key)
            if len(batch) == 5000:
                store.unlink(*batch)
                batch.clear()
        if batch:
            store.unlink(*batch)


# -- public reads --------------------------------------------------------------------------


def _public_reads_nginx(workdir: Path, upstream: int, root: Path, static_port: int, cache_port: int) -> str:
    """nginx with the static ceiling on `static_port` and the shipped proxy_cache in front of Tessera."""
    shipped = REPO_ROOT / "app" / "ops" / "nginx-public-cache.conf"
    return nginx_config(
        workdir,
        f"""
    upstream tessera_web {{ server 127.0.0.1:{upstream}; keepalive 64; }}
    proxy_cache_path {workdir}/cache levels=1:2 keys_zone=tessera_public:10m max_size=64m inactive=10m;
{static_public_reads_server(static_port, root)}
    server {{
        listen 127.0.0.1:{cache_port};
        include {shipped};
    }}""",
    )


def test_public_card_read_vs_nginx(app, real_worker, peer_workdir):
    """nginx serving the card as a static file; Tessera alone; Tessera behind the shipped proxy_cache config."""
    _needs_postgres()
    wrk = ensure_binary("wrk", "wrk")
    nginx = ensure_binary("nginx", "nginx")
    tessera_port, static_port, cache_port = free_port(), free_port(), free_port()
    tessera = start_procfile_web(tessera_port, {"RATELIMIT_ENABLED": "1"})
    proxy = None
    try:
        did, card, document = seed_card(f"http://127.0.0.1:{tessera_port}")
        root = peer_workdir / "www"
        for folder, body in (("agent-card", card), ("did", document)):
            (root / "api" / folder).mkdir(parents=True)
            (root / "api" / folder / did).write_bytes(body)
        config = peer_workdir / "nginx.conf"
        config.write_text(_public_reads_nginx(peer_workdir, tessera_port, root, static_port, cache_port))
        proxy = subprocess.Popen(
            [nginx, "-c", str(config), "-p", str(peer_workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        path = f"/api/agent-card/{did}"
        wait_for_url(f"http://127.0.0.1:{static_port}{path}", proxy, timeout=60)
        cached = httpx.get(f"http://127.0.0.1:{cache_port}{path}")
        assert cached.content == card and httpx.get(f"http://127.0.0.1:{cache_port}{path}").headers[
            "x-cache-status"
        ] in ("HIT", "REVALIDATED")
        did_path = f"/api/did/{did}"
        rows: dict[str, list[dict]] = {
            "tessera": [],
            "tessera+cache": [],
            "nginx static": [],
            "tessera DID": [],
            "nginx static DID": [],
        }
        for _ in range(ROUNDS):
            rows["tessera"].append(
                _wrk(wrk, f"http://127.0.0.1:{tessera_port}{path}", 64, READ_SECONDS, server_pid=tessera.pid)
            )
            rows["tessera DID"].append(
                _wrk(wrk, f"http://127.0.0.1:{tessera_port}{did_path}", 64, READ_SECONDS, server_pid=tessera.pid)
            )
            rows["nginx static DID"].append(
                _wrk(wrk, f"http://127.0.0.1:{static_port}{did_path}", 64, READ_SECONDS, server_pid=proxy.pid)
            )
            rows["tessera+cache"].append(
                _wrk(wrk, f"http://127.0.0.1:{cache_port}{path}", 64, READ_SECONDS, server_pid=proxy.pid)
            )
            rows["nginx static"].append(
                _wrk(wrk, f"http://127.0.0.1:{static_port}{path}", 64, READ_SECONDS, server_pid=proxy.pid)
            )
        medians = {name: _median(values) for name, values in rows.items()}
        print(
            f"\n[peer bench] GET /api/agent-card/<did>, 64 connections, {READ_SECONDS} s rounds x {ROUNDS} "
            f"interleaved, medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
            "(CPU ms of the nginx rows is nginx's own)"
        )
        _print_pair("app path", medians["tessera"], medians["nginx static"], "nginx static")
        _print_pair("behind shipped proxy_cache", medians["tessera+cache"], medians["nginx static"], "nginx static")
        _print_pair("DID document, app path", medians["tessera DID"], medians["nginx static DID"], "nginx static")
    finally:
        if proxy is not None:
            stop_process(proxy)
        stop_process(tessera)


# -- jobs ----------------------------------------------------------------------------------

JOBS_PER_ROUND = 2000


def _tessera_jobs_round(app, client_id: int, workers: list[subprocess.Popen], finished_before: int) -> dict:
    cpu_before, began = group_cpu_seconds(workers), time.perf_counter()
    enqueue_canaries(app, JOBS_PER_ROUND, client_id)  # commits, then publishes every job
    wait_finished(app, client_id, finished_before + JOBS_PER_ROUND, timeout=300, poll=0.02)
    elapsed = time.perf_counter() - began
    cpu_ms = (group_cpu_seconds(workers) - cpu_before) * 1000 / JOBS_PER_ROUND
    return {"rps": JOBS_PER_ROUND / elapsed, "cpu_ms": cpu_ms}


def test_jobs_vs_bare_celery(app, real_worker, peer_workdir):
    """Canary jobs (row claimed, effect and final state committed) vs a no-op task, 2 worker processes each."""
    _needs_postgres()
    broker = server_env()["REDIS_URL"]
    queue_name = f"noop-{os.getpid()}"
    real_worker.stop()
    ours = [environment.start_worker(concurrency=1) for _ in range(2)]
    bare = start_bare_celery_workers(peer_workdir, broker, queue_name)
    try:
        client_id = make_master(app, "Peer benchmark jobs").client_id
        _tessera_jobs_round(app, client_id, ours, 0)  # warm-up: imports and connections
        finished = JOBS_PER_ROUND
        bare_celery_round(broker, queue_name, bare, JOBS_PER_ROUND)
        tessera_rows, bare_rows = [], []
        for _ in range(ROUNDS):
            tessera_rows.append(_tessera_jobs_round(app, client_id, ours, finished))
            finished += JOBS_PER_ROUND
            bare_rows.append(bare_celery_round(broker, queue_name, bare, JOBS_PER_ROUND))
    finally:
        for process in ours + bare:
            stop_process(process)
        real_worker.start()
    tessera, celery_noop = _median(tessera_rows), _median(bare_rows)
    print(
        f"\n[peer bench] jobs, {JOBS_PER_ROUND} per round x {ROUNDS} interleaved, 2 worker processes each, "
        f"medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'':<28}{'tessera jobs':<22}{tessera['rps']:>9.0f} jobs/s{tessera['cpu_ms']:>9.2f} CPU ms/job (workers)")
    print(
        f"{'':<28}{'bare Celery no-op':<22}{celery_noop['rps']:>9.0f} jobs/s"
        f"{celery_noop['cpu_ms']:>9.2f} CPU ms/job (workers)"
    )
    print(f"{'':<28}ratio tessera/bare Celery: throughput {tessera['rps'] / celery_noop['rps']:.2f}")


# -- authenticated reads -------------------------------------------------------------------


def test_authenticated_read_cpu(app):
    """`GET /v1/sub_client/{id}` with an x-api-token beside `/healthz` (the same stack, no work)."""
    from app.db import transaction
    from app.extensions import db
    from app.tenancy import service
    from app.tenancy.auth import Caller
    from app.tenancy.models import Client

    _needs_postgres()
    wrk = ensure_binary("wrk", "wrk")
    master = make_master(app, "Peer benchmark reads")
    with app.app_context(), transaction():
        root = db.session.get(Client, master.client_id)
        caller = Caller(root.id, 0, True, root.id, root.path, root.id, root.path)
        child = service.create_sub_client(caller, {"name": "child"}).id
    port = free_port()
    tessera = start_procfile_web(port, {})
    try:
        headers = {"x-api-token": master.api_token}
        assert httpx.get(f"http://127.0.0.1:{port}/v1/sub_client/{child}", headers=headers).status_code == 200
        reads, bare = [], []
        for _ in range(ROUNDS):
            reads.append(
                _wrk(
                    wrk,
                    f"http://127.0.0.1:{port}/v1/sub_client/{child}",
                    32,
                    READ_SECONDS,
                    headers=headers,
                    server_pid=tessera.pid,
                )
            )
            bare.append(_wrk(wrk, f"http://127.0.0.1:{port}/healthz", 32, READ_SECONDS, server_pid=tessera.pid))
        print(
            f"\n[peer bench] authenticated read, 32 connections, {READ_SECONDS} s rounds x {ROUNDS} interleaved, "
            f"medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (target <= 1 ms CPU)"
        )
        _print_pair("GET /v1/sub_client/{id}", _median(reads), _median(bare), "/healthz")
    finally:
        stop_process(tessera)


# -- credential verification ---------------------------------------------------------------

WRK_POST_ONE = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = io.open({path}, "rb")
wrk.body = file:read("*a")
file:close()
"""


def test_verification_vs_digital_bazaar(app, peer_workdir):
    """`POST /v1/vc/verify` of an eddsa-rdfc-2022 credential beside Digital Bazaar's verifier of the same
    credential with the same contexts, one request at a time (c=1: the latency a caller waits)."""
    import json

    from app.credentials.jsonld.loader import make_document_loader
    from tests.benchmarks.test_verify_bench import _signed_credential
    from tests.support.vectors import VECTORS

    _needs_postgres()
    wrk = ensure_binary("wrk", "wrk")
    _npm_ci(VC_PEER_DIR, peer_workdir)
    builtin = make_document_loader(None, builtin=True)
    (peer_workdir / "contexts.json").write_text(json.dumps({url: builtin(url)["document"] for url in builtin.urls}))
    credential = _signed_credential("eddsa-rdfc-2022", "Ed25519", make_document_loader(VECTORS / "contexts"))
    body = peer_workdir / "body.json"
    body.write_text(json.dumps({"verifiableCredential": credential}))
    script = peer_workdir / "post-one.lua"
    script.write_text(WRK_POST_ONE.format(path=json.dumps(str(body))))
    master = make_master(app, "Peer benchmark verification")
    tessera_port, node_port = free_port(), free_port()
    tessera = start_procfile_web(tessera_port, {})
    node = subprocess.Popen(
        ["node", "verifier.mjs", str(node_port), "contexts.json"],
        cwd=peer_workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        headers = {"x-api-token": master.api_token}
        ours_url, theirs_url = f"http://127.0.0.1:{tessera_port}/v1/vc/verify", f"http://127.0.0.1:{node_port}/verify"
        wait_for_url(theirs_url, node)  # a GET is a malformed verification (400): the server is up
        assert httpx.post(theirs_url, content=body.read_bytes(), timeout=10).json() == {"verified": True}
        assert (
            httpx.post(
                ours_url, content=body.read_bytes(), headers={**headers, "Content-Type": "application/json"}, timeout=10
            ).json()["verified"]
            is True
        )
        ours, theirs = [], []
        for _ in range(ROUNDS):
            ours.append(_wrk(wrk, ours_url, 1, READ_SECONDS, script, headers=headers, server_pid=tessera.pid))
            theirs.append(_wrk(wrk, theirs_url, 1, READ_SECONDS, script, server_pid=node.pid))
        print(
            f"\n[peer bench] eddsa-rdfc-2022 verification over HTTP, 1 connection, {READ_SECONDS} s rounds "
            f"x {ROUNDS} interleaved, medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
        mine, peer = _median(ours), _median(theirs)
        _print_pair("POST verify (c=1)", mine, peer, "digitalbazaar")
        print(
            f"{'':<28}p50 tessera {mine['p50']:.2f} ms, digitalbazaar {peer['p50']:.2f} ms: "
            f"digitalbazaar/tessera {peer['p50'] / mine['p50']:.2f}"
        )
    finally:
        stop_process(node)
        stop_process(tessera)
