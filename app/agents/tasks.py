"""Agent network jobs: each one registry or card write, committed with the job's final state."""

from __future__ import annotations

from app.agents import cards, consents, credits, registry
from app.agents.schemas import (
    ApprovedConsentOut,
    DeregistrationOut,
    HostedCardOut,
    RegisteredCardUriOut,
    RevokedOwnerOut,
    UnpublishedCardOut,
)
from app.db import transaction
from app.extensions import celery
from app.jobs.runner import job_task


@job_task("agents.host_card")
def host_card(job):
    return HostedCardOut().dump(cards.host_card_from_job(job))


@job_task("agents.card_unpublish")
def card_unpublish(job):
    return UnpublishedCardOut().dump(cards.card_unpublish_from_job(job))


@job_task("agents.set_card")
def set_card(job):
    return RegisteredCardUriOut().dump(cards.set_card_from_job(job))


@job_task("agents.deregister")
def deregister(job):
    return DeregistrationOut().dump(registry.deregister_from_job(job))


@job_task("agents.approve_consent")
def approve_consent(job):
    return ApprovedConsentOut().dump(consents.approve_consent_from_job(job))


@job_task("agents.revoke_owner")
def revoke_owner(job):
    return RevokedOwnerOut().dump(consents.revoke_owner_from_job(job))


@celery.task(name="agents.purge_expired", ignore_result=True)
def purge_expired() -> int:
    with transaction():
        return credits.purge_expired()


def beat_schedule(app) -> dict:
    return {"agents-purge-expired": {"task": "agents.purge_expired", "schedule": 3600.0}}
