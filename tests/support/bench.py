"""Pieces the benchmarks share: ports, servers coming up, percentiles, and seeded data.

Benchmarks print figures and never fail on time; these helpers only measure and prepare.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx

from tests.support.agents import LiveServer, claim_key_over_http

REPO_ROOT = Path(__file__).resolve().parents[2]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_url(url: str, process: subprocess.Popen | None = None, timeout: float = 30.0) -> None:
    """Until `url` answers below 500; fails when `process` (the server) exits first or on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server for {url} exited")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not come up")


def ensure_binary(binary: str, package: str) -> str:
    """The path of `binary`, installing the Debian `package` that provides it when missing."""
    found = shutil.which(binary) or (f"/usr/sbin/{binary}" if Path(f"/usr/sbin/{binary}").exists() else None)
    if found:
        return found
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(install, capture_output=True, env=env).returncode != 0:
        subprocess.run(["apt-get", "update"], capture_output=True, check=True, env=env)
        subprocess.run(install, capture_output=True, check=True, env=env)
    return shutil.which(binary) or f"/usr/sbin/{binary}"


WEB_FACTORY = "app.serving:web_app"


def procfile_web_command() -> str:
    """The command line of the Procfile's `web` process."""
    for line in (REPO_ROOT / "Procfile").read_text().splitlines():
        if line.startswith("web:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("Procfile has no web process")


def _process_tree(pid: int) -> list[int]:
    pids, pending = [], [pid]
    while pending:
        current = pending.pop()
        pids.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
                pending.extend(int(child) for child in children)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return pids


def server_env() -> dict:
    """This environment for a server the benchmark starts: PostgreSQL and Redis reached directly (the
    suite reaches them through fault-injection proxies), and the default log level, so each request
    writes its access line as in production (the suite runs at WARNING)."""
    env = {**os.environ, "LOG_LEVEL": "INFO"}
    for name in ("DATABASE_URL", "REDIS_URL"):
        if os.environ.get(f"DIRECT_{name}"):
            env[name] = os.environ[f"DIRECT_{name}"]
    return env


def start_procfile_web(
    port: int, extra: dict, *, target: str | None = None, ready_path: str = "/healthz"
) -> subprocess.Popen:
    """The Procfile's web process on `port` with `extra` settings, once it answers `ready_path`;
    with `target`, the same command serving that WSGI factory instead of the app."""
    url = f"http://localhost:{port}"
    env = {**server_env(), "PORT": str(port), "BASE_URL": url, "OIDC_ISSUER": url, **extra}
    command = procfile_web_command()
    if target is not None:
        command = command.replace(WEB_FACTORY, target)
    process = subprocess.Popen(
        ["sh", "-c", "exec " + command],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_for_url(f"{url}{ready_path}", process, timeout=60)
    return process


def _stat_fields(stat: str) -> list[str]:
    """The fields of a /proc/<pid>/stat line after the command name (state first)."""
    return stat.rsplit(")", 1)[1].split()


def _cpu_ticks(fields: list[str]) -> int:
    """User + system CPU in clock ticks, from `_stat_fields`."""
    return int(fields[11]) + int(fields[12])


def server_cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and its descendants (threads included), from /proc."""
    total = 0
    for member in _process_tree(pid):
        try:
            total += _cpu_ticks(_stat_fields(Path(f"/proc/{member}/stat").read_text()))
        except FileNotFoundError:
            continue
    return total / CLOCK_TICKS


# Per `remember` key: the CPU ticks last read of each process matched, and those of the processes
# that have exited since (read last before they exited).
_last_ticks: dict[str, dict[int, int]] = {}
_exited_ticks: dict[str, int] = {}


def cpu_seconds(matches: Callable[[int, str], bool], *, remember: str | None = None) -> float:
    """User + system CPU time of the processes whose (process group, command line) satisfy `matches`.

    With `remember`, a process read before under the same key that has exited since still counts
    what it had used when last read, so the figure never falls between two readings: a PostgreSQL
    backend that ends during a round (a test's own connection that wrote the round's codes) would
    otherwise take its whole past CPU off that round's figures.
    """
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = _stat_fields(stat)
        if matches(int(fields[2]), command):
            ticks[int(entry.name)] = _cpu_ticks(fields)
    exited = 0
    if remember is not None:
        last = _last_ticks.get(remember, {})
        exited = _exited_ticks[remember] = _exited_ticks.get(remember, 0) + sum(
            used for pid, used in last.items() if pid not in ticks
        )
        _last_ticks[remember] = ticks
    return (sum(ticks.values()) + exited) / CLOCK_TICKS


def database_backend_cpu_seconds() -> float:
    """CPU time so far of the test database's PostgreSQL backends (0 on SQLite)."""
    from sqlalchemy.engine import make_url

    url = os.environ.get("DIRECT_DATABASE_URL")
    if not url:
        return 0.0
    database = make_url(url).database
    return cpu_seconds(
        lambda _group, command: command.startswith("postgres:") and f" {database} " in command,
        remember=f"postgres {database}",
    )


def redis_cpu_seconds() -> float:
    """CPU time so far of the Redis server (all of it: other runs on this machine share it)."""
    return cpu_seconds(lambda _group, command: command.startswith("redis-server"), remember="redis")


def run_wrk(
    url: str,
    connections: int,
    seconds: int,
    *,
    script: Path | None = None,
    script_args: list[str] | None = None,
    headers: dict | None = None,
    threads: int = 2,
) -> dict:
    """One `wrk` run (installed from Debian when missing): req/s, p50 and p99 in ms, requests, failed."""
    wrk = ensure_binary("wrk", "wrk")
    command = [wrk, f"-t{min(threads, connections)}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    command += ["--timeout", "10s"]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    if script is not None:
        command += ["-s", str(script)]
    command.append(url)
    if script_args:
        command += ["--", *script_args]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": _ms(re.search(r"50%\s+([\d.]+\w+)", output).group(1)),
        "p99": _ms(re.search(r"99%\s+([\d.]+\w+)", output).group(1)),
        "requests": int(re.search(r"(\d+) requests in", output).group(1)),
        "failed": (int(non_2xx.group(1)) if non_2xx else 0) + (sum(map(int, errors.groups())) if errors else 0),
    }


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(\w+)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` (0..1) of the sorted values, rounded to the nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def latency_ms(operation: Callable[[], object], *, iterations: int, warmup: int) -> tuple[float, float]:
    """(p50, p99) wall time of `operation` in milliseconds, after `warmup` unmeasured runs."""
    for _ in range(warmup):
        operation()
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return samples[len(samples) // 2] * 1e3, samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3


def issue_codes(app, tenant, count: int) -> list[str]:
    """`count` authorization codes of `tenant`'s user, written straight to the database."""
    return [code for code, _verifier in _write_codes(app, tenant, count, signed_in=False)]


def issue_signed_in_codes(app, tenant, count: int) -> list[tuple[str, str]]:
    """`count` (code, PKCE verifier) pairs as a browser sign-in leaves them: a login session of
    `tenant`'s user whose `sid` the codes carry, each code bound to an S256 challenge."""
    return _write_codes(app, tenant, count, signed_in=True)


def _write_codes(app, tenant, count: int, *, signed_in: bool) -> list[tuple[str, str | None]]:
    from app.db import transaction, utcnow
    from app.extensions import db
    from app.oidc.models import AuthorizationCode, LoginSession
    from app.security import hash_secret, random_token

    pairs = [(random_token(32), random_token(32) if signed_in else None) for _ in range(count)]
    now = utcnow()
    sid = random_token(16) if signed_in else None
    with app.app_context(), transaction():
        if signed_in:
            db.session.add(LoginSession(
                token_hash=hash_secret(random_token(32)), user_id=tenant.user_id, root_client_id=tenant.client_id,
                auth_time=now, expires_at=now + timedelta(hours=1), sid=sid, amr="otp",
            ))  # fmt: skip
        db.session.add_all(AuthorizationCode(
            code_hash=hash_secret(code), client_id=tenant.client_id, user_id=tenant.user_id,
            redirect_uri=tenant.redirect_uri, scope="openid profile email", nonce="bench-nonce",
            code_challenge=_s256(verifier) if verifier else None, sid=sid, amr="otp" if signed_in else None,
            auth_time=now, created_at=now, expires_at=now + timedelta(hours=1),
        ) for code, verifier in pairs)  # fmt: skip
    return pairs


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def seed_card(base_url: str) -> tuple[str, bytes, bytes]:
    """Claim a key on the claim page, host a card; returns (did, card bytes, DID document bytes)."""
    from app.client.library import TesseraClient

    key = claim_key_over_http(LiveServer(base_url))
    card = (
        b'{"type": "https://eips.ethereum.org/EIPS/eip-8004#registration-v1", "name": "Bench", '
        b'"description": "' + b"b" * 1500 + b'", "services": [], "x402Support": false}\n'
    )
    with TesseraClient(base_url, api_key=key, poll_interval=0.05, job_timeout=60) as client:
        job = client.host_card(card)
        did = job["result"]["did"]
        client.set_card("https://bench.example/.well-known/agent-card.json")
    document = httpx.get(f"{base_url}/api/did/{did}").content
    assert httpx.get(f"{base_url}/api/agent-card/{did}").content == card
    return did, card, document


def enqueue_canaries(app, count: int, client_id: int) -> list[str]:
    """Enqueue `count` no-op `jobs.canary` jobs in one transaction (published after its commit)."""
    from app.db import transaction
    from app.jobs.service import enqueue_job

    with app.app_context(), transaction():
        return [enqueue_job("jobs.canary", {}, client_id=client_id).id for _ in range(count)]


def finished_count(app, client_id: int) -> int:
    """How many jobs of `client_id` succeeded."""
    from sqlalchemy import func, select

    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        done = db.session.scalar(
            select(func.count()).select_from(Job).where(Job.client_id == client_id, Job.state == "succeeded")
        )
        db.session.rollback()
    return done


def wait_finished(app, client_id: int, count: int, timeout: float, poll: float) -> None:
    """Wait until `count` jobs of `client_id` succeeded (one indexed count per poll, cheap for the server)."""
    deadline = time.monotonic() + timeout
    while finished_count(app, client_id) < count:
        if time.monotonic() > deadline:
            raise AssertionError("jobs did not finish")
        time.sleep(poll)


def nginx_config(workdir: Path, http_body: str) -> str:
    """An nginx.conf for a foreground nginx whose files all live in `workdir`; `http_body` goes in `http {}`."""
    return f"""
user root;
worker_processes auto;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
{http_body}
}}
"""


def static_public_reads_server(port: int, root: Path) -> str:
    """An nginx `server` serving stored cards and DID documents as static files (the ceiling)."""
    return f"""
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location /api/agent-card/ {{ default_type application/json; add_header Cache-Control "public, max-age=60"; }}
        location /api/did/ {{ default_type application/did+json; add_header Cache-Control "public, max-age=60"; }}
    }}"""


# A Celery app with one no-op task, the ceiling of any job pipeline on the same broker and workers.
BARE_CELERY_APP = """
import os

import redis
from celery import Celery

app = Celery("noop", broker=os.environ["NOOP_BROKER"])
app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
                task_default_queue=os.environ["NOOP_QUEUE"], worker_hijack_root_logger=False)
counter = redis.Redis.from_url(os.environ["NOOP_BROKER"])


@app.task(name="noop", ignore_result=True)
def noop():
    counter.incr(os.environ["NOOP_QUEUE"] + ":done")
"""


def start_bare_celery_workers(workdir: Path, broker: str, queue_name: str, count: int = 2) -> list[subprocess.Popen]:
    """`count` worker processes (concurrency 1 each) of `BARE_CELERY_APP`, written into `workdir`."""
    (workdir / "noop_app.py").write_text(BARE_CELERY_APP)
    env = {**os.environ, "NOOP_BROKER": broker, "NOOP_QUEUE": queue_name}
    command = [sys.executable, "-m", "celery", "-A", "noop_app", "worker", "--concurrency", "1", "--pool", "prefork"]
    command += ["--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    return [
        subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(count)
    ]


def group_cpu_seconds(processes: list[subprocess.Popen]) -> float:
    """CPU time so far of `processes` and their descendants."""
    return sum(server_cpu_seconds(process.pid) for process in processes)


def bare_celery_round(broker: str, queue_name: str, workers: list[subprocess.Popen], jobs: int) -> dict:
    """Send `jobs` no-op tasks from this process and wait for `workers` to run them: jobs/s, worker CPU ms per job."""
    import redis
    from celery import Celery

    sender = Celery("noop-sender", broker=broker)
    sender.conf.task_default_queue = queue_name
    counter = redis.Redis.from_url(broker)
    done_key = queue_name + ":done"
    counter.delete(done_key)
    cpu_before, began = group_cpu_seconds(workers), time.perf_counter()
    with sender.connection_for_write() as connection:
        for _ in range(jobs):
            sender.send_task("noop", connection=connection, queue=queue_name)
    deadline = time.monotonic() + 300
    while int(counter.get(done_key) or 0) < jobs:
        if time.monotonic() > deadline:
            raise AssertionError("the bare Celery workers did not finish")
        time.sleep(0.02)
    elapsed = time.perf_counter() - began
    return {"rps": jobs / elapsed, "cpu_ms": (group_cpu_seconds(workers) - cpu_before) * 1000 / jobs}
