"""The job runner's statements (claim, lock, final state) and `app.dialect`, with the same outcomes on
SQLite and on PostgreSQL: the default run executes the statements production runs.

Jobs are written here and run by hand in this process (never published); what another process sees
is read through a connection of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from app.jobs.models import FAILED, QUEUED, RUNNING, SUCCEEDED, CanaryRun, Job
from tests.support import environment


@pytest.fixture
def other(app) -> Iterator[Connection]:
    """A connection of its own, as another process would read the database (an engine of its own:
    this process's units of work take SQLite's write lock at BEGIN)."""
    from app.extensions import db

    with app.app_context():
        engine = create_engine(db.engine.url, poolclass=NullPool)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def written_job(app, state: str = QUEUED) -> str:
    from app.db import transaction, utcnow
    from app.extensions import db

    job_id = str(uuid.uuid4())
    with app.app_context(), transaction():
        db.session.add(Job(id=job_id, kind="jobs.contract", state=state, payload={}, attempts=0, created_at=utcnow()))
    return job_id


def seen(other: Connection, job_id: str) -> dict:
    """The job's row and its canary runs, as committed."""
    row = other.execute(select(Job.__table__).where(Job.id == job_id)).mappings().one()
    runs = other.execute(select(func.count()).select_from(CanaryRun).where(CanaryRun.job_id == job_id)).scalar()
    other.rollback()
    return {**row, "runs": runs}


def test_a_job_is_claimed_while_it_is_not_final(app, other):
    from app.jobs.service import claim_job

    job_id = written_job(app)
    with app.app_context():
        assert claim_job(job_id)
        first = seen(other, job_id)
        assert claim_job(job_id)  # a running job is claimed again (its worker died): one more attempt
        assert not claim_job(str(uuid.uuid4()))
    again = seen(other, job_id)
    assert (first["state"], first["attempts"], again["attempts"]) == (RUNNING, 1, 2)
    assert again["started_at"] == first["started_at"] and again["lease_expires_at"] >= first["lease_expires_at"]
    final = written_job(app, SUCCEEDED)
    with app.app_context():
        assert not claim_job(final)
    assert seen(other, final)["attempts"] == 0


def test_the_claim_is_committed_before_the_effect_and_the_final_state_with_it(app, other):
    from app.jobs.service import run_canary, run_job

    job_id = written_job(app)
    during = {}

    def handler(job):
        during.update(seen(other, job.id))
        return run_canary(job)

    with app.app_context():
        run_job(job_id, handler)
        run_job(job_id, handler)  # a final job is left alone
    assert (during["state"], during["attempts"], during["runs"]) == (RUNNING, 1, 0)
    after = seen(other, job_id)
    assert (after["state"], after["attempts"], after["runs"]) == (SUCCEEDED, 1, 1)
    assert after["result"] == {"delay_ms": 0} and after["error"] is None
    assert after["lease_expires_at"] is None and after["finished_at"] is not None


def test_a_refused_effect_fails_the_job_and_its_writes_are_discarded(app, other):
    from app.errors import Conflict
    from app.jobs.service import run_canary, run_job

    job_id = written_job(app)

    def refused(job):
        run_canary(job)
        raise Conflict("refused")

    with app.app_context():
        run_job(job_id, refused)
    after = seen(other, job_id)
    assert (after["state"], after["runs"], after["error"]["code"]) == (FAILED, 0, "conflict")


def test_a_crashed_effect_leaves_the_job_running_and_the_retry_runs_once(app, other):
    from app.jobs.service import run_canary, run_job

    job_id = written_job(app)

    def crashed(job):
        run_canary(job)
        raise RuntimeError("worker lost")

    with app.app_context():
        with pytest.raises(RuntimeError):
            run_job(job_id, crashed)
        assert (seen(other, job_id)["state"], seen(other, job_id)["runs"]) == (RUNNING, 0)
        run_job(job_id, run_canary)
    after = seen(other, job_id)
    assert (after["state"], after["attempts"], after["runs"]) == (SUCCEEDED, 2, 1)


def test_a_call_outside_runs_between_two_transactions(app, other):
    from app.db import transaction_open
    from app.jobs.service import CallOutside, run_canary, run_job

    job_id = written_job(app)
    outside = {}

    def calls_out(job):
        def call():
            outside["open"] = transaction_open()
            outside["row"] = seen(other, job_id)
            return "answer"

        return CallOutside(call=call, record=lambda job, answer: {**run_canary(job), "answer": answer})

    with app.app_context():
        run_job(job_id, calls_out)
    assert outside["open"] is False and outside["row"]["state"] == RUNNING
    after = seen(other, job_id)
    assert (after["state"], after["runs"], after["result"]["answer"]) == (SUCCEEDED, 1, "answer")


def test_units_of_work_open_once_per_edge(app):
    from app.db import Mode, commit_with, transaction, unit_of_work
    from app.jobs.service import _FINISH_JOB

    with app.app_context():
        with transaction(), pytest.raises(RuntimeError, match="inside"), unit_of_work(Mode.READ):
            pass
        with transaction(), pytest.raises(RuntimeError, match="job"):
            commit_with(_FINISH_JOB, {})
        with unit_of_work(Mode.STATEMENT) as connection:
            assert connection.execute(select(func.count()).select_from(Job)).scalar() >= 0


def test_the_job_lock_holds_the_row_and_the_sweep_skips_it(app, other):
    from app.jobs.service import run_canary, run_job

    job_id = written_job(app)
    held = {}

    def handler(job):
        locked = select(Job.id).where(Job.id == job.id).with_for_update(nowait=True)
        skipped = select(Job.id).where(Job.id == job.id).with_for_update(skip_locked=True)
        if environment.USING_POSTGRES:
            with pytest.raises(OperationalError):
                other.execute(locked)
            other.rollback()
            held["skipped"] = other.execute(skipped).first() is None
            other.rollback()
        else:  # one writer at a time: SQLite's write lock, taken at BEGIN, is the lock
            held["skipped"] = True
        return run_canary(job)

    with app.app_context():
        run_job(job_id, handler)
    assert held["skipped"] and seen(other, job_id)["state"] == SUCCEEDED


def test_one_transaction_at_a_time_holds_a_named_lock(app):
    from app.db import transaction
    from app.dialect import try_transaction_lock
    from app.extensions import db

    with app.app_context(), transaction():
        assert try_transaction_lock(db.session.connection(), 0x7E57, Job.__table__)
        if environment.USING_POSTGRES:
            with db.engine.connect() as second:
                assert not try_transaction_lock(second, 0x7E57, Job.__table__)
                second.rollback()
    if environment.USING_POSTGRES:
        with app.app_context(), db.engine.connect() as third:  # released at the commit
            assert try_transaction_lock(third, 0x7E57, Job.__table__)
            third.rollback()


def test_the_claims_relaxed_durability_ends_with_it(app):
    from app.db import Mode, unit_of_work
    from app.extensions import db
    from app.jobs.service import _CLAIM_JOB, _LOCK_JOB, _claim_values

    job_id = written_job(app)
    with app.app_context(), unit_of_work(Mode.JOB):
        from app.db import commit_on_its_own

        claimed, row = commit_on_its_own(_CLAIM_JOB, _claim_values(job_id), then=_LOCK_JOB)
        assert claimed == 1 and row[0] == job_id
        if environment.USING_POSTGRES:
            assert db.session.execute(select(func.current_setting("synchronous_commit"))).scalar() == "on"


def test_a_row_version_changes_with_every_write_of_the_row_and_only_then(app, other):
    """`row_version` on either database: the same while the row is not written, new after every
    UPDATE that changes it (on PostgreSQL after any UPDATE: a new version is a cache miss, never a
    stale answer), distinct between rows."""
    from sqlalchemy import update

    from app.db import transaction, utcnow
    from app.dialect import row_version
    from app.extensions import db

    first, second = written_job(app), written_job(app)
    jobs = Job.__table__

    def versions() -> dict[str, str]:
        rows = other.execute(select(jobs.c.id, row_version(jobs)).where(jobs.c.id.in_([first, second]))).all()
        other.rollback()
        return dict(rows)

    before = versions()
    assert versions() == before and before[first] != before[second]
    for values in ({"attempts": 1}, {"attempts": 2}, {"payload": {"a": 1}}, {"finished_at": utcnow()}):
        with app.app_context(), transaction():
            db.session.execute(update(jobs).where(jobs.c.id == first).values(**values))
        after = versions()
        assert after[first] != before[first] and after[second] == before[second]
        before = after
