"""Agent network jobs: each one registry or card write, committed with the job's final state."""

from __future__ import annotations

from app.agents import service
from app.db import transaction
from app.extensions import celery
from worker.base import job_task


@job_task("agents.host_card")
def host_card(job):
    return service.host_card_from_job(job)


@job_task("agents.card_unpublish")
def card_unpublish(job):
    return service.card_unpublish_from_job(job)


@job_task("agents.set_card")
def set_card(job):
    return service.set_card_from_job(job)


@job_task("agents.deregister")
def deregister(job):
    return service.deregister_from_job(job)


@job_task("agents.approve_consent")
def approve_consent(job):
    return service.approve_consent_from_job(job)


@job_task("agents.revoke_owner")
def revoke_owner(job):
    return service.revoke_owner_from_job(job)


@celery.task(name="agents.purge_expired", ignore_result=True)
def purge_expired() -> int:
    with transaction():
        return service.purge_expired()


def beat_schedule(app) -> dict:
    return {"agents-purge-expired": {"task": "agents.purge_expired", "schedule": 3600.0}}
