"""A database outage never uses up a job's retries, on the embedded default: a worker on SQLite and its broker.

While another process holds SQLite's write lock, every call of the worker fails at its busy timeout
(`DB_CALL_TIMEOUT`); the jobs wait that out, however long, and run once the lock is released. The PostgreSQL
side (a cut and a frozen server) is in tests/jobs/test_outbox_delivery.py.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid

import pytest
from sqlalchemy.engine import make_url

from app.jobs.runner import MAX_RETRIES
from tests.support import environment

pytestmark = [
    pytest.mark.skipif(environment.USING_POSTGRES, reason="SQLite's write lock and the embedded broker"),
    # A task this eager process has imported is still sent to the embedded broker by name (Celery warns so).
    pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored"),
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated"),
]


def queued_canaries(app, master, count: int) -> list[str]:
    """Committed canaries handed to the embedded broker, as a request's commit does in a deployment."""
    from app.db import transaction
    from app.extensions import celery, db
    from app.jobs.service import enqueue_job

    with app.app_context():
        with transaction():
            job_ids = [enqueue_job("jobs.canary", {}, client_id=master.client_id).id for _ in range(count)]
            db.session.info.pop("after_commit", None)  # this process runs jobs eagerly: the worker runs these
        for job_id in job_ids:
            celery.send_task("jobs.canary", args=[job_id], kwargs={"request_id": None})
    return job_ids


def wait_for_log(path, text: str, times: int, timeout: float = 60.0) -> None:
    """Until `text` is in the worker's log `times` times."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text(errors="replace").count(text) >= times):
        assert time.monotonic() < deadline, f"{text!r} not logged {times} times: {path.read_text()[-2000:]}"
        time.sleep(0.1)


def test_jobs_wait_out_a_held_write_lock_longer_than_their_retries_and_run_once(app, master, wait_for_job):
    from app.jobs.service import count_canary_runs

    job_ids = queued_canaries(app, master, 3)
    holder = sqlite3.connect(make_url(os.environ["DATABASE_URL"]).database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    log_path = environment.TMP_DIR / f"worker-sqlite-lock-{uuid.uuid4().hex[:6]}.log"
    worker = environment.start_worker(
        concurrency=1, log_path=log_path,
        extra_env={"DB_CALL_TIMEOUT": "0.2", "JOB_RETRY_BACKOFF_MAX": "0.2", "JOB_OUTAGE_RETRY_MAX": "0.3"},
    )  # fmt: skip
    try:
        try:
            for job_id in job_ids:  # each job met the lock more often than it may fail
                wait_for_log(log_path, f"job {job_id}", times=MAX_RETRIES + 2)
        finally:
            holder.rollback()
            holder.close()
        finished = [wait_for_job(job_id, timeout=30) for job_id in job_ids]
    finally:
        environment.stop_process(worker)
    assert [job["state"] for job in finished] == ["succeeded"] * 3, finished
    with app.app_context():
        assert all(count_canary_runs(job_id) == 1 for job_id in job_ids)
