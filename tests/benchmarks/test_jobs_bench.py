"""Jobs on PostgreSQL + Redis: enqueue-to-finished latency and throughput, in process and as a
client submits them over HTTP.

Prints figures; never fails on time. Besides wall-clock figures, which other processes on a shared
machine distort, it prints the CPU time the two worker processes and the test database's
PostgreSQL backends spent per job, the CPU time of enqueueing and publishing a job, and the
throughput two idle cores could sustain at that cost.

`test_jobs_submitted_over_http` measures what a user gets: `POST /v1/jobs/canary` sent by `wrk`
to the Procfile's web process (granian, its access line at INFO) while two worker processes run
the jobs, jobs/s from the first job made to the last one finished, beside a bare Celery no-op
task on the same broker and as many workers, in interleaved rounds; with the CPU per job of the
web server, the workers, the test database's PostgreSQL backends and the Redis server (which
other runs on a shared machine use too).
Run: DATABASE_URL=... REDIS_URL=... pytest -m benchmark tests/benchmarks/test_jobs_bench.py -s
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pytest

from tests.support import environment
from tests.support.bench import (
    bare_celery_round,
    cpu_seconds,
    database_backend_cpu_seconds,
    enqueue_canaries,
    finished_count,
    free_port,
    group_cpu_seconds,
    percentile,
    redis_cpu_seconds,
    run_wrk,
    server_cpu_seconds,
    server_env,
    start_bare_celery_workers,
    start_procfile_web,
    wait_finished,
)
from tests.support.tenancy import make_master

pytestmark = [pytest.mark.benchmark, pytest.mark.realworker]

SEQUENTIAL_JOBS = 300
BATCH_JOBS = 3000
HTTP_ROUNDS = 3
HTTP_SECONDS = 5
HTTP_CONNECTIONS = 16
BARE_JOBS = 2000
WRK_POST_EMPTY_JSON = """
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
"""


def _durations(app, job_ids: list[str]) -> tuple[list[float], float, float]:
    from sqlalchemy import select

    from app.db import as_utc
    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        rows = db.session.execute(
            select(Job.created_at, Job.finished_at).where(Job.id.in_(job_ids), Job.state == "succeeded")
        ).all()
        db.session.rollback()
    assert len(rows) == len(job_ids)
    latencies = [(as_utc(done) - as_utc(made)).total_seconds() * 1000 for made, done in rows]
    first = min(as_utc(made) for made, _ in rows)
    last = max(as_utc(done) for _, done in rows)
    return latencies, first.timestamp(), last.timestamp()


def _cpu_snapshot(workers) -> tuple[float, float]:
    """CPU seconds so far of the worker process groups and of the test database's backends."""
    groups = {process.pid for process in workers}
    return cpu_seconds(lambda group, _command: group in groups), database_backend_cpu_seconds()


def test_job_round_trip(app, real_worker):
    real_worker.stop()
    workers = [environment.start_worker(concurrency=1) for _ in range(2)]
    sequential_client = make_master(app, "Jobs benchmark, one at a time").client_id
    batch_client = make_master(app, "Jobs benchmark, batch").client_id
    try:
        # Warm up both workers (imports, connections) before anything is timed.
        enqueue_canaries(app, 20, sequential_client)
        wait_finished(app, sequential_client, 20, timeout=60, poll=0.05)

        sequential = []
        for index in range(SEQUENTIAL_JOBS):
            sequential += enqueue_canaries(app, 1, sequential_client)
            wait_finished(app, sequential_client, 21 + index, timeout=30, poll=0.002)
        latencies, _, _ = _durations(app, sequential)

        workers_before, backends_before = _cpu_snapshot(workers)
        enqueue_started = time.process_time()
        batch = enqueue_canaries(app, BATCH_JOBS, batch_client)  # commits, then publishes every job
        enqueue_ms = (time.process_time() - enqueue_started) * 1000 / len(batch)
        wait_finished(app, batch_client, BATCH_JOBS, timeout=300, poll=0.05)
        workers_after, backends_after = _cpu_snapshot(workers)
        _, first, last = _durations(app, batch)
        throughput = len(batch) / (last - first)
    finally:
        for process in workers:
            environment.stop_process(process)
        real_worker.start()

    worker_ms = (workers_after - workers_before) * 1000 / len(batch)
    backend_ms = (backends_after - backends_before) * 1000 / len(batch)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        "\njob round trip (PostgreSQL + Redis, 2 worker processes): "
        f"p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms "
        f"(n={len(latencies)}); throughput {throughput:.0f} jobs/s over {len(batch)} jobs "
        "(targets: p50 < 15 ms, >= 500 jobs/s)"
        f"\nCPU per job: workers {worker_ms:.2f} ms, PostgreSQL backends {backend_ms:.2f} ms, "
        f"enqueue and publish {enqueue_ms:.2f} ms; two idle cores would sustain about "
        f"{2000 / (worker_ms + backend_ms + enqueue_ms):.0f} jobs/s at that cost (Redis not counted); "
        f"load average {load}"
    )


def _cpu_by_process(web, workers) -> dict[str, float]:
    """CPU seconds so far of the web server, the workers, the test database's backends and Redis."""
    return {
        "web_ms": server_cpu_seconds(web.pid),
        "workers_ms": group_cpu_seconds(workers),
        "postgres_ms": database_backend_cpu_seconds(),
        "redis_ms": redis_cpu_seconds(),
    }


def _http_round(app, url: str, script: Path, headers: dict, client_id: int, web, workers) -> dict:
    """Jobs posted by `wrk` for `HTTP_SECONDS`, run by `workers`: throughput and CPU per job from
    the first request to the last job finished."""
    finished_before = finished_count(app, client_id)
    cpu_before, began = _cpu_by_process(web, workers), time.perf_counter()
    sent = run_wrk(url, HTTP_CONNECTIONS, HTTP_SECONDS, script=script, headers=headers)
    jobs = sent["requests"] - sent["failed"]
    wait_finished(app, client_id, finished_before + jobs, timeout=300, poll=0.02)
    elapsed = time.perf_counter() - began
    cpu = {name: (seconds - cpu_before[name]) * 1000 / jobs for name, seconds in _cpu_by_process(web, workers).items()}
    return {"jobs_per_s": jobs / elapsed, "posted_per_s": sent["rps"], "p50": sent["p50"], "p99": sent["p99"],
            "failed": sent["failed"], **cpu}  # fmt: skip


def test_jobs_submitted_over_http(app, real_worker):
    """`POST /v1/jobs/canary` over HTTP with two worker processes running the jobs, beside bare Celery."""
    workdir = Path(tempfile.mkdtemp(prefix="tessera-jobs-bench-"))
    script = workdir / "post.lua"
    script.write_text(WRK_POST_EMPTY_JSON)
    broker = server_env()["REDIS_URL"]
    queue_name = f"noop-{os.getpid()}"
    master = make_master(app, "Jobs over HTTP benchmark")
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/jobs/canary"
    real_worker.stop()
    web = start_procfile_web(port, {})
    workers = [environment.start_worker(concurrency=1) for _ in range(2)]
    bare = start_bare_celery_workers(workdir, broker, queue_name)
    try:
        # Warm-up: both web processes, both workers and the bare workers, before anything is timed.
        _http_round(app, url, script, master.headers, master.client_id, web, workers)
        bare_celery_round(broker, queue_name, bare, BARE_JOBS)
        ours, theirs = [], []
        for _ in range(HTTP_ROUNDS):
            ours.append(_http_round(app, url, script, master.headers, master.client_id, web, workers))
            theirs.append(bare_celery_round(broker, queue_name, bare, BARE_JOBS))
    finally:
        for process in [web, *workers, *bare]:
            environment.stop_process(process)
        real_worker.start()
        shutil.rmtree(workdir, ignore_errors=True)

    tessera = {key: statistics.median(row[key] for row in ours) for key in ours[0]}
    celery_noop = {key: statistics.median(row[key] for row in theirs) for key in theirs[0]}
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"\njobs submitted over HTTP (POST /v1/jobs/canary, Procfile web, {HTTP_CONNECTIONS} connections, "
        f"{HTTP_SECONDS} s, 2 worker processes), {HTTP_ROUNDS} rounds interleaved with bare Celery, medians; "
        f"load average {load} on {os.cpu_count()} CPUs (target >= 500 jobs/s)"
        f"\n  tessera over HTTP    {tessera['jobs_per_s']:6.0f} jobs/s run ({tessera['posted_per_s']:.0f} posted/s, "
        f"p50 {tessera['p50']:.1f} ms, p99 {tessera['p99']:.1f} ms, {tessera['failed']:.0f} failed)"
        f"\n  bare Celery no-op    {celery_noop['rps']:6.0f} "
        f"jobs/s (sent in process), workers {celery_noop['cpu_ms']:.2f} CPU ms/job"
        f"\n  ratio tessera over HTTP / bare Celery: {tessera['jobs_per_s'] / celery_noop['rps']:.2f}"
        f"\n  CPU ms per job: web {tessera['web_ms']:.2f}, workers {tessera['workers_ms']:.2f}, "
        f"PostgreSQL backends {tessera['postgres_ms']:.2f}, Redis {tessera['redis_ms']:.2f} (Redis shared), "
        f"total {tessera['web_ms'] + tessera['workers_ms'] + tessera['postgres_ms'] + tessera['redis_ms']:.2f}"
    )
