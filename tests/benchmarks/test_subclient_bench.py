"""Sub-client reads under 32 concurrent connections, the web server started as in the Procfile.

`GET /v1/sub_client` (a page of 20) and `GET /v1/sub_client/{id}` with a valid x-api-token,
against the session's database (PostgreSQL when `DATABASE_URL` is set, as the issue asks), the
server writing its access line at INFO as in production. Prints requests per second, p50/p99
latency and the CPU per request of the server (its processes, from /proc), of the test database's
PostgreSQL backends and of the Redis server (shared with other runs on the machine); never fails
on time. The load generator (processes of threads with keep-alive connections) shares the
machine with the server.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
     pytest -m benchmark tests/benchmarks/test_subclient_bench.py -s
"""

from __future__ import annotations

import http.client
import multiprocessing
import os
import statistics
import threading
import time

import httpx
import pytest

from tests.support.bench import (
    database_backend_cpu_seconds,
    free_port,
    redis_cpu_seconds,
    server_cpu_seconds,
    start_procfile_web,
)
from tests.support.environment import USING_POSTGRES, stop_process
from tests.support.tenancy import make_master

pytestmark = pytest.mark.benchmark

CONNECTIONS = 32
PROCESSES = 4
DURATION_SECONDS = 8.0
WARMUP_SECONDS = 1.5
CHILDREN = 60


def _load_process(port, paths, headers, threads, start_at, stop_at, results) -> None:
    """`threads` keep-alive connections cycling through `paths`; latencies after the warm-up."""
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()

    def run(offset: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        failed = 0
        index = offset
        while True:
            began = time.perf_counter()
            if began >= stop_at:
                break
            path = paths[index % len(paths)]
            index += 1
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            if began >= start_at:
                mine.append(time.perf_counter() - began)
                failed += 0 if ok else 1
        connection.close()
        with lock:
            latencies.extend(mine)
            failures[0] += failed

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put((latencies, failures[0]))


def _measure(port: int, paths: list[str], headers: dict, server_pid: int) -> dict:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start_at = time.perf_counter() + WARMUP_SECONDS
    stop_at = start_at + DURATION_SECONDS
    per_process = CONNECTIONS // PROCESSES
    processes = [
        context.Process(target=_load_process, args=(port, paths, headers, per_process, start_at, stop_at, results))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    # CPU over the measured window only (the warm-up excluded), per request answered.
    time.sleep(max(0.0, start_at - time.perf_counter()))
    cpu_before = _cpu_by_process(server_pid)
    time.sleep(max(0.0, stop_at - time.perf_counter()))
    cpu = {name: seconds - cpu_before[name] for name, seconds in _cpu_by_process(server_pid).items()}
    latencies: list[float] = []
    failures = 0
    for _ in processes:
        chunk, failed = results.get(timeout=DURATION_SECONDS + WARMUP_SECONDS + 60)
        latencies.extend(chunk)
        failures += failed
    for process in processes:
        process.join(timeout=10)
    latencies.sort()
    return {
        "requests": len(latencies),
        "failures": failures,
        "rps": len(latencies) / DURATION_SECONDS,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        **{name: seconds * 1000 / len(latencies) if latencies else float("nan") for name, seconds in cpu.items()},
    }


def _cpu_by_process(server_pid: int) -> dict[str, float]:
    """CPU seconds so far of the server, the test database's PostgreSQL backends and Redis."""
    return {
        "server_ms": server_cpu_seconds(server_pid),
        "postgres_ms": database_backend_cpu_seconds(),
        "redis_ms": redis_cpu_seconds(),
    }


def test_sub_client_reads_under_load(app):
    master = make_master(app, "Benchmark organisation")
    from app.db import transaction
    from app.extensions import db
    from app.tenancy import service
    from app.tenancy.caller import Caller
    from app.tenancy.models import Client

    with app.app_context(), transaction():
        root = db.session.get(Client, master.client_id)
        caller = Caller(root.id, 0, True, root.id, root.path, root.id, root.path)
        children = [
            service.create_sub_client(caller, {"name": f"child {i}", "city": "Lyon", "timezone": "Europe/Paris"}).id
            for i in range(CHILDREN)
        ]

    port = free_port()
    server = start_procfile_web(port, {})
    try:
        headers = {"x-api-token": master.api_token, "Connection": "keep-alive"}
        probe = httpx.get(f"http://127.0.0.1:{port}/v1/sub_client?per_page=20", headers=headers)
        assert probe.status_code == 200 and len(probe.json()["data"]) == 20
        pages = [f"/v1/sub_client?page={page}&per_page=20" for page in (1, 2, 3)]
        singles = [f"/v1/sub_client/{client_id}" for client_id in children]
        figures = {"GET /v1/sub_client (page of 20)": _measure(port, pages, headers, server.pid)}
        figures["GET /v1/sub_client/{id}"] = _measure(port, singles, headers, server.pid)
    finally:
        stop_process(server)

    backend = "PostgreSQL" if USING_POSTGRES else "SQLite"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"\nsub-client reads, {backend}, web server per Procfile, {CONNECTIONS} connections, "
        f"{DURATION_SECONDS:.0f} s, {os.cpu_count()} CPUs, load average {load} "
        "(target for the page: <= 1.5 ms CPU per request, server + PostgreSQL + Redis)"
    )
    for name, result in figures.items():
        total = result["server_ms"] + result["postgres_ms"] + result["redis_ms"]
        print(
            f"  {name:<32} {result['rps']:8.1f} req/s   p50 {result['p50_ms']:6.1f} ms   "
            f"p99 {result['p99_ms']:6.1f} ms   CPU ms/req: server {result['server_ms']:.2f}, "
            f"PostgreSQL {result['postgres_ms']:.2f}, Redis {result['redis_ms']:.2f} (shared), total {total:.2f}   "
            f"({result['requests']} requests, {result['failures']} failed)"
        )
    assert all(result["requests"] > 0 for result in figures.values())
