"""Running a job on PostgreSQL, where the claim, BEGIN and row lock share one round trip and the
final state travels with the COMMIT: the claim is committed before the effect, the row stays locked
while the handler works, and a connection lost before the final state commits nothing.

Jobs here are run by hand in this process (never published), seen from a connection of their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

pytestmark = pytest.mark.realworker


@pytest.fixture
def other() -> Iterator[psycopg.Connection]:
    url = make_url(os.environ["DIRECT_DATABASE_URL"]).set(drivername="postgresql")
    connection = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)
    yield connection
    connection.close()


def unpublished_canary(app, master) -> str:
    from app.db import commit
    from app.extensions import db
    from app.jobs.service import enqueue_job

    with app.app_context():
        job_id = enqueue_job("jobs.canary", {}, client_id=master.client_id).id
        db.session.info.pop("after_commit", None)  # run by hand below, not by the session's worker
        commit()
    return job_id


def state_and_runs(other: psycopg.Connection, job_id: str) -> tuple[str, int, int]:
    state, attempts = other.execute("SELECT state, attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()
    runs = other.execute("SELECT count(*) FROM canary_runs WHERE job_id = %s", (job_id,)).fetchone()[0]
    return state, attempts, runs


def test_the_claim_is_committed_and_the_row_locked_while_the_handler_works(app, master, other):
    from app.jobs.service import run_canary, run_job

    job_id = unpublished_canary(app, master)
    seen = {}

    def handler(job):
        seen["during"] = state_and_runs(other, job.id)
        with pytest.raises(psycopg.errors.LockNotAvailable), other.transaction():
            other.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE NOWAIT", (job.id,))
        return run_canary(job)

    with app.app_context():
        run_job(job_id, handler)
    assert seen["during"] == ("running", 1, 0)
    assert state_and_runs(other, job_id) == ("succeeded", 1, 1)


def test_a_connection_lost_before_the_final_state_commits_nothing_and_the_retry_runs_once(app, master, other):
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from app.extensions import db
    from app.jobs.service import run_canary, run_job

    job_id = unpublished_canary(app, master)

    def effect_then_connection_lost(job):
        result = run_canary(job)
        backend = db.session.execute(text("SELECT pg_backend_pid()")).scalar()
        other.execute("SELECT pg_terminate_backend(%s)", (backend,))
        return result

    with app.app_context():
        with pytest.raises(DBAPIError):
            run_job(job_id, effect_then_connection_lost)
        assert state_and_runs(other, job_id) == ("running", 1, 0)
        run_job(job_id, run_canary)  # what the task's retry does
    assert state_and_runs(other, job_id) == ("succeeded", 2, 1)
