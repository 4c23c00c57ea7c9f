"""Failure behaviour on PostgreSQL + Redis with real worker processes.

The web side reaches PostgreSQL and Redis through loopback proxies (see tests/support/environment.py) that these
tests cut, so a dependency really becomes unreachable for the service while workers go on.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.support import environment

pytestmark = pytest.mark.realworker


def count_runs(app, job_id: str) -> int:
    from app.jobs.service import count_canary_runs

    with app.app_context():
        return count_canary_runs(job_id)


def sweep(app) -> int:
    from app.jobs.service import sweep_outbox

    with app.app_context():
        return sweep_outbox()


def test_worker_killed_mid_job_finishes_exactly_once(app, client, master, real_worker, wait_for_job):
    real_worker.stop()
    real_worker.start(extra_env={"JOB_LEASE_SECONDS": "1"})
    response = client.post("/v1/jobs/canary", json={"delay_ms": 3000}, headers=master.headers)
    job_id = response.get_json()["data"]["id"]
    wait_for_job(job_id, states=("running",))
    real_worker.stop(signal.SIGKILL)

    running = environment.fetch_job(app, job_id)
    assert running["state"] == "running"
    assert count_runs(app, job_id) == 0

    real_worker.start(extra_env={"JOB_LEASE_SECONDS": "1"})
    time.sleep(1.2)  # let the dead worker's lease run out
    deadline = time.monotonic() + 30
    while environment.fetch_job(app, job_id)["state"] != "succeeded" and time.monotonic() < deadline:
        sweep(app)
        time.sleep(0.5)
    finished = wait_for_job(job_id, timeout=15)
    assert finished["state"] == "succeeded"
    assert count_runs(app, job_id) == 1
    real_worker.stop()
    real_worker.start()


def test_broker_down_at_commit_loses_nothing(app, client, master, wait_for_job):
    environment.REDIS_PROXY.cut()
    try:
        response = client.post("/v1/jobs/canary", json={}, headers=master.headers)
        assert response.status_code == 202
        job_id = response.get_json()["data"]["id"]
        time.sleep(0.5)
        assert environment.fetch_job(app, job_id)["state"] == "queued"
        assert client.get("/readyz").status_code == 503
    finally:
        environment.REDIS_PROXY.restore()
    # What the beat's periodic sweep does once the broker is back (grace shortened for the test).
    grace, app.config["OUTBOX_GRACE_SECONDS"] = app.config["OUTBOX_GRACE_SECONDS"], 0
    try:
        deadline = time.monotonic() + 20
        while environment.fetch_job(app, job_id)["state"] == "queued" and time.monotonic() < deadline:
            sweep(app)
            time.sleep(0.5)
    finally:
        app.config["OUTBOX_GRACE_SECONDS"] = grace
    assert wait_for_job(job_id)["state"] == "succeeded"
    assert count_runs(app, job_id) == 1


def test_jobs_published_together_while_the_broker_is_down_stay_in_the_outbox_and_run_once(
    app, master, real_worker, wait_for_job
):
    from sqlalchemy import select

    from app.db import transaction
    from app.extensions import db
    from app.jobs.models import Job
    from app.jobs.service import enqueue_job

    environment.REDIS_PROXY.cut()
    try:
        with app.app_context(), transaction():  # one transaction, so its jobs go out in one publish batch
            job_ids = [enqueue_job("jobs.canary", {}, client_id=master.client_id).id for _ in range(3)]
        with app.app_context():
            rows = db.session.execute(select(Job.state, Job.published_at).where(Job.id.in_(job_ids))).all()
            db.session.rollback()
        assert rows == [("queued", None)] * 3
    finally:
        environment.REDIS_PROXY.restore()
    grace, app.config["OUTBOX_GRACE_SECONDS"] = app.config["OUTBOX_GRACE_SECONDS"], 0
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
            environment.fetch_job(app, job_id)["state"] == "queued" for job_id in job_ids
        ):
            sweep(app)
            time.sleep(0.5)
    finally:
        app.config["OUTBOX_GRACE_SECONDS"] = grace
    for job_id in job_ids:
        assert wait_for_job(job_id)["state"] == "succeeded"
        assert count_runs(app, job_id) == 1


def test_database_down_answers_503_and_recovers(app, client, master):
    environment.DB_PROXY.cut()
    try:
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.get_json()["checks"]["database"] == "unreachable"
        assert int(ready.headers["Retry-After"]) > 0
        write = client.post("/v1/jobs/canary", json={}, headers=master.headers)
        assert write.status_code == 503
        assert write.mimetype == "application/problem+json"
        assert write.get_json()["code"] == "service_unavailable"
        assert int(write.headers["Retry-After"]) > 0
    finally:
        environment.DB_PROXY.restore()
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/jobs/canary", json={}, headers=master.headers).status_code == 202
