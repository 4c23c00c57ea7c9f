"""Tasks of verifiable credentials: checking the proofs of a stored credential."""

from __future__ import annotations

from app.credentials import service
from worker.base import job_task


@job_task("credentials.verify")
def verify_stored_credential(job):
    return service.verify_stored_credential_from_job(job)
