"""Job round trip on PostgreSQL + Redis: enqueue-to-finished latency and throughput.

Prints figures; never fails on time. Run: DATABASE_URL=... REDIS_URL=... pytest -m benchmark
tests/benchmarks/test_jobs_bench.py -s
"""

from __future__ import annotations

import statistics
import time

import pytest

from tests import conftest

pytestmark = [pytest.mark.benchmark, pytest.mark.realworker]


def _enqueue(app, count: int, client_id: int) -> list[str]:
    from app.db import transaction
    from app.jobs.service import enqueue_job

    with app.app_context(), transaction():
        return [enqueue_job("jobs.canary", {}, client_id=client_id).id for _ in range(count)]


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


def _wait_all(app, job_ids: list[str], timeout: float) -> None:
    from sqlalchemy import func, select

    from app.extensions import db
    from app.jobs.models import Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with app.app_context():
            done = db.session.scalar(
                select(func.count()).select_from(Job).where(Job.id.in_(job_ids), Job.state == "succeeded")
            )
            db.session.rollback()
        if done == len(job_ids):
            return
        time.sleep(0.05)
    raise AssertionError("jobs did not finish")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def test_job_round_trip(app, master, real_worker):
    real_worker.stop()
    workers = [conftest.start_worker(concurrency=1) for _ in range(2)]
    try:
        _wait_all(app, _enqueue(app, 20, master.client_id), timeout=60)  # warm up both workers

        sequential = []
        for _ in range(300):
            job_ids = _enqueue(app, 1, master.client_id)
            _wait_all(app, job_ids, timeout=30)
            sequential += job_ids
        latencies, _, _ = _durations(app, sequential)

        batch = _enqueue(app, 3000, master.client_id)
        _wait_all(app, batch, timeout=300)
        _, first, last = _durations(app, batch)
        throughput = len(batch) / (last - first)
    finally:
        for process in workers:
            conftest.stop_process(process)
        real_worker.start()

    print(
        "\njob round trip (PostgreSQL + Redis, 2 worker processes): "
        f"p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms "
        f"(n={len(latencies)}); throughput {throughput:.0f} jobs/s over {len(batch)} jobs "
        "(targets: p50 < 15 ms, >= 500 jobs/s)"
    )
