"""Tasks of verifiable credentials: checking a stored credential, re-checking foreign statuses."""

from __future__ import annotations

import os

from app.credentials import service
from app.db import transaction
from app.extensions import celery
from worker.base import job_task


@job_task("credentials.verify")
def verify_stored_credential(job):
    return service.verify_stored_credential_from_job(job)


@celery.task(name="credentials.recheck_status", ignore_result=True)
def recheck_status() -> int:
    """Queue fresh checks of credentials whose foreign status lists are due; one commit."""
    with transaction():
        return service.recheck_foreign_status()


def beat_schedule(app) -> dict:
    interval = float(app.config.get("STATUS_RECHECK_SECONDS") or os.environ.get("STATUS_RECHECK_SECONDS") or 3600)
    return {"credentials-status-recheck": {"task": "credentials.recheck_status", "schedule": interval}}
