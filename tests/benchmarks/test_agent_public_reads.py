"""Public agent reads under 64 concurrent connections: the Procfile's web server vs nginx.

`/api/agent-card/<did>` and `/api/did/<did>` served by the application under the Procfile's
web line, against nginx serving the very same bytes as static files on this machine
(the practical ceiling). Prints requests per second, p50/p99 latency, the server's CPU per
request (from /proc) and the ratio; never fails on time. nginx is installed from Debian when
missing. The load generator (Python processes with keep-alive connections) shares the machine
with the server, so both figures are lower bounds.

Run: pytest -m benchmark tests/benchmarks/test_agent_public_reads.py -s
"""

from __future__ import annotations

import http.client
import multiprocessing
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.bench import (
    REPO_ROOT,
    ensure_binary,
    free_port,
    nginx_config,
    procfile_web_command,
    seed_card,
    server_cpu_seconds,
    static_public_reads_server,
    wait_for_url,
)
from tests.support.environment import stop_process

pytestmark = pytest.mark.benchmark

CONCURRENCY = 64
PROCESSES = 4
DURATION_SECONDS = 6.0
WARMUP_SECONDS = 1.0


def _load_worker(port: int, path: str, connections: int, start_at: float, stop_at: float, queue) -> None:
    """One load process: `connections` keep-alive connections, latencies after the warm-up."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def loop() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine: list[float] = []
        failed = 0
        while True:
            began = time.perf_counter()
            if began >= stop_at:
                break
            try:
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            ended = time.perf_counter()
            if began >= start_at:
                if ok:
                    mine.append(ended - began)
                else:
                    failed += 1
        connection.close()
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    threads = [threading.Thread(target=loop) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queue.put((latencies, errors[0]))


def _measure(port: int, path: str, server_pid: int) -> dict:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    now = time.perf_counter()
    start_at, stop_at = now + WARMUP_SECONDS, now + WARMUP_SECONDS + DURATION_SECONDS
    per_process = CONCURRENCY // PROCESSES
    workers = [
        context.Process(target=_load_worker, args=(port, path, per_process, start_at, stop_at, queue))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    # The server's CPU over the measured window only (the warm-up excluded), per request answered.
    time.sleep(max(0.0, start_at - time.perf_counter()))
    cpu_before = server_cpu_seconds(server_pid)
    time.sleep(max(0.0, stop_at - time.perf_counter()))
    cpu = server_cpu_seconds(server_pid) - cpu_before
    latencies: list[float] = []
    errors = 0
    for _ in workers:
        got, failed = queue.get(timeout=DURATION_SECONDS + 60)
        latencies.extend(got)
        errors += failed
    for worker in workers:
        worker.join()
    latencies.sort()
    count = len(latencies)
    return {
        "requests": count,
        "errors": errors,
        "rps": count / DURATION_SECONDS,
        "p50_ms": statistics.median(latencies) * 1000 if count else float("nan"),
        "p99_ms": latencies[min(count - 1, int(count * 0.99))] * 1000 if count else float("nan"),
        "cpu_ms": cpu * 1000 / count if count else float("nan"),
    }


def _start_web(port: int, env: dict) -> subprocess.Popen:
    # The Procfile's web line, bound to a free loopback port.
    return subprocess.Popen(
        ["sh", "-c", "exec " + procfile_web_command()], cwd=REPO_ROOT, env={**env, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def _start_nginx(nginx: str, root: Path, port: int, workdir: Path) -> subprocess.Popen:
    config = workdir / "nginx.conf"
    config.write_text(nginx_config(workdir, static_public_reads_server(port, root)))
    return subprocess.Popen(
        [nginx, "-c", str(config), "-p", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_public_reads_web_server_vs_nginx(app, real_worker):
    nginx = ensure_binary("nginx", "nginx-light")
    workdir = Path(tempfile.mkdtemp(prefix="tessera-bench-"))
    env = {**os.environ, "RATELIMIT_ENABLED": "0", "LOG_LEVEL": "WARNING"}
    # On PostgreSQL + Redis the test process reaches them through fault-injection proxies; the
    # server under test connects directly, as a deployment would.
    for name in ("DATABASE_URL", "REDIS_URL"):
        if os.environ.get(f"DIRECT_{name}"):
            env[name] = os.environ[f"DIRECT_{name}"]
    web_port, nginx_port = free_port(), free_port()
    # The client library signs only sign-in challenges naming the server it talks to.
    env["BASE_URL"] = f"http://localhost:{web_port}"
    web = _start_web(web_port, env)
    nginx_process = None
    try:
        base_url = f"http://localhost:{web_port}"
        wait_for_url(f"{base_url}/api/pricing")
        did, card, document = seed_card(base_url)

        root = workdir / "www"
        (root / "api" / "agent-card").mkdir(parents=True)
        (root / "api" / "did").mkdir(parents=True)
        (root / "api" / "agent-card" / did).write_bytes(card)
        (root / "api" / "did" / did).write_bytes(document)
        nginx_process = _start_nginx(nginx, root, nginx_port, workdir)
        wait_for_url(f"http://127.0.0.1:{nginx_port}/api/agent-card/{did}")
        assert httpx.get(f"http://127.0.0.1:{nginx_port}/api/agent-card/{did}").content == card

        print(
            f"\npublic reads, {CONCURRENCY} concurrent keep-alive connections, {DURATION_SECONDS:.0f} s each, "
            f"{os.cpu_count()} CPUs shared with the load generator; web workers="
            f"{env.get('WEB_CONCURRENCY', '2')} threads={env.get('WEB_THREADS', '2')}, "
            f"database {app.config['SQLALCHEMY_DATABASE_URI'].split(':', 1)[0]}"
        )
        print(f"{'endpoint':<18}{'server':<10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'CPU ms/req':>12}{'errors':>8}")
        for label, path in (("agent-card", f"/api/agent-card/{did}"), ("did", f"/api/did/{did}")):
            results = {
                "tessera": _measure(web_port, path, web.pid),
                "nginx": _measure(nginx_port, path, nginx_process.pid),
            }
            for server, figures in results.items():
                print(
                    f"{label:<18}{server:<10}{figures['rps']:>10.0f}{figures['p50_ms']:>10.2f}"
                    f"{figures['p99_ms']:>10.2f}{figures['cpu_ms']:>12.3f}{figures['errors']:>8}"
                )
            ratio = results["tessera"]["rps"] / results["nginx"]["rps"] if results["nginx"]["rps"] else float("nan")
            print(f"{label:<18}tessera/nginx throughput ratio: {ratio:.3f}")
    finally:
        if nginx_process is not None:
            stop_process(nginx_process)
        stop_process(web)
        shutil.rmtree(workdir, ignore_errors=True)
