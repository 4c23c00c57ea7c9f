"""Tasks of the job pipeline itself: the canary and the outbox sweep."""

from __future__ import annotations

from app.extensions import celery
from app.jobs import service
from worker.base import job_task


@job_task("jobs.canary")
def canary(job):
    return service.run_canary(job)


@celery.task(name="jobs.sweep_outbox", ignore_result=True)
def sweep_outbox() -> int:
    return service.sweep_outbox()


def beat_schedule(app) -> dict:
    return {
        "outbox-sweep": {"task": "jobs.sweep_outbox", "schedule": app.config["OUTBOX_SWEEP_INTERVAL"]},
    }
