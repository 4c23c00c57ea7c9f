"""Job round trip on PostgreSQL + Redis: enqueue-to-finished latency and throughput.

Prints figures; never fails on time. Besides wall-clock figures, which other processes on a shared
machine distort, it prints the CPU time the two worker processes and the test database's
PostgreSQL backends spent per job, the CPU time of enqueueing and publishing a job, and the
throughput two idle cores could sustain at that cost.
Run: DATABASE_URL=... REDIS_URL=... pytest -m benchmark tests/benchmarks/test_jobs_bench.py -s
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from tests.support import environment
from tests.support.bench import cpu_seconds, database_backend_cpu_seconds, enqueue_canaries, percentile, wait_finished
from tests.support.tenancy import make_master

pytestmark = [pytest.mark.benchmark, pytest.mark.realworker]

SEQUENTIAL_JOBS = 300
BATCH_JOBS = 3000


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
