"""Tasks of verifiable credentials: checking a stored credential or a large presentation, re-checking
foreign statuses."""

from __future__ import annotations

from app.credentials import service
from app.credentials.settings import CredentialSettings
from app.db import transaction
from app.extensions import celery
from app.jobs.runner import MAX_RETRIES, job_task
from app.settings import current


# A verification is deterministic and kept within half the lease: a job started again and
# again (its worker killed each time) fails with a reason, and its credential with it.
@job_task("credentials.verify", max_attempts=MAX_RETRIES + 1)
def verify_stored_credential(job):
    return service.verify_stored_credential_from_job(job)


@job_task("credentials.verify_presentation", max_attempts=MAX_RETRIES + 1)
def verify_presentation(job):
    return service.verify_presentation_from_job(job)


@celery.task(name="credentials.recheck_status", ignore_result=True)
def recheck_status() -> int:
    """Queue fresh checks of credentials whose foreign status lists are due; one commit."""
    with transaction():
        return service.recheck_foreign_status()


def beat_schedule(app) -> dict:
    # 0 makes every credential due at each run (tests); beat itself still runs hourly then.
    interval = current(CredentialSettings, app).status_recheck_seconds or 3600.0
    return {"credentials-status-recheck": {"task": "credentials.recheck_status", "schedule": interval}}
