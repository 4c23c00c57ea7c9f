"""The outbox sweep on either database: what it publishes, and the oldest-queued-job gauge."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from app.db import utcnow
from tests.support import environment


def add_unpublished_job(app, master, *, age: timedelta) -> str:
    """A canary whose publish never happened (the broker was down when its request committed)."""
    from app.db import transaction
    from app.extensions import db
    from app.jobs.models import Job

    job_id = str(uuid.uuid4())
    with app.app_context(), transaction():
        db.session.add(
            Job(
                id=job_id,
                kind="jobs.canary",
                state="queued",
                payload={},
                client_id=master.client_id,
                attempts=0,
                created_at=utcnow() - age,
            )
        )
    return job_id


# In the SQLite run jobs are eager, but a kind this process never imported goes to the embedded
# broker by name (Celery warns that eagerness does not apply, and kombu's SQLite transport uses a
# loader option SQLAlchemy deprecates); neither concerns what this test checks.
@pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored")
@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")
def test_the_sweep_command_publishes_a_job_the_broker_never_took_once(app, master, wait_for_job):
    from app.jobs.service import count_canary_runs

    job_id = add_unpublished_job(app, master, age=timedelta(minutes=5))
    runner = app.test_cli_runner()
    first = runner.invoke(args=["outbox", "sweep"])
    assert first.exit_code == 0, first.output
    assert wait_for_job(job_id)["state"] == "succeeded"
    again = runner.invoke(args=["outbox", "sweep"])
    assert again.exit_code == 0
    assert wait_for_job(job_id)["state"] == "succeeded"
    with app.app_context():
        assert count_canary_runs(job_id) == 1


def test_the_oldest_queued_job_age_is_exported(app, master, client, real_worker):
    from app.db import transaction
    from app.extensions import db
    from app.jobs.models import Job

    if environment.USING_POSTGRES:
        real_worker.stop()  # its own sweeps would run the job before the scrape
    job_id = add_unpublished_job(app, master, age=timedelta(hours=3))
    try:
        body = client.get("/metrics").get_data(as_text=True)
    finally:
        with app.app_context(), transaction():
            db.session.get(Job, job_id).state = "failed"
        if environment.USING_POSTGRES:
            real_worker.start()
    line = next(line for line in body.splitlines() if line.startswith("tessera_jobs_oldest_queued_age_seconds "))
    assert float(line.split()[1]) >= 3 * 3600
