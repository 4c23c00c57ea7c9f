"""Social fetch tasks: one job per linked platform account, and the background refresh."""

from __future__ import annotations

from app.db import transaction
from app.extensions import celery
from app.jobs.runner import job_task
from app.settings import current
from app.social import service
from app.social.errors import FetchDeferred
from app.social.settings import SocialSettings


@job_task(service.FETCH_JOB, deferred=(FetchDeferred,))
def fetch(job):
    return service.fetch_link_from_job(job)


@celery.task(name="social.refresh_stale", ignore_result=True)
def refresh_stale() -> int:
    with transaction():
        service.purge_expired_link_records()
        return service.schedule_stale_refreshes()


def beat_schedule(app) -> dict:
    return {
        "social-refresh": {
            "task": "social.refresh_stale",
            "schedule": current(SocialSettings, app).refresh_interval,
        },
    }
