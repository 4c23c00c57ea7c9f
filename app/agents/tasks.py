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
from app.agents.settings import AgentSettings
from app.chain import index
from app.chain.errors import NotYetConfirmed, NotYetMined
from app.chain.settings import EVM, ChainSettings
from app.db import Mode, transaction, unit_of_work
from app.extensions import celery
from app.jobs.runner import job_task
from app.settings import current

# How often beat follows the registry contract's events (AGENT_REGISTRY_BACKEND=evm only).
FOLLOW_SECONDS = 5.0


@job_task("agents.host_card", deferred=(NotYetMined, NotYetConfirmed))
def host_card(job):
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_cards import host_card_on_chain  # web3 (about 1 s) loads only where a chain is used

        return host_card_on_chain(job)
    return HostedCardOut().dump(cards.host_card_from_job(job))


@job_task("agents.card_unpublish", deferred=(NotYetMined, NotYetConfirmed))
def card_unpublish(job):
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_jobs import card_unpublish_on_chain  # web3 loads only where a chain is used

        return card_unpublish_on_chain(job)
    return UnpublishedCardOut().dump(cards.card_unpublish_from_job(job))


@job_task("agents.set_card", deferred=(NotYetMined, NotYetConfirmed))
def set_card(job):
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_jobs import set_card_on_chain  # web3 (about 1 s) loads only where a chain is used

        return set_card_on_chain(job)
    return RegisteredCardUriOut().dump(cards.set_card_from_job(job))


@job_task("agents.deregister", deferred=(NotYetMined, NotYetConfirmed))
def deregister(job):
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_jobs import deregister_on_chain  # web3 loads only where a chain is used

        return deregister_on_chain(job)
    return DeregistrationOut().dump(registry.deregister_from_job(job))


@job_task("agents.approve_consent", deferred=(NotYetMined, NotYetConfirmed))
def approve_consent(job):
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_jobs import approve_consent_on_chain  # web3 loads only where a chain is used

        return approve_consent_on_chain(job)
    return ApprovedConsentOut().dump(consents.approve_consent_from_job(job))


@job_task("agents.revoke_owner", deferred=(NotYetMined, NotYetConfirmed))
def revoke_owner(job):
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_jobs import revoke_owner_on_chain  # web3 loads only where a chain is used

        return revoke_owner_on_chain(job)
    return RevokedOwnerOut().dump(consents.revoke_owner_from_job(job))


@celery.task(name="agents.purge_expired", ignore_result=True)
def purge_expired() -> int:
    with transaction():
        return credits.purge_expired()


@celery.task(name="agents.follow_registry", ignore_result=True)
def follow_registry() -> int:
    """Read the registry contract's newly confirmed events into the index; the number applied.

    The cursor is read, the node asked with no transaction open, then the events applied in one
    write (a follower that lost the race to another applies nothing).
    """
    network = current(AgentSettings).network
    with unit_of_work(Mode.READ):
        start = index.next_block(network)
    batch = index.read_registry_events(network, start)
    with transaction():
        return index.apply_registry_events(batch)


def beat_schedule(app) -> dict:
    schedule = {"agents-purge-expired": {"task": "agents.purge_expired", "schedule": 3600.0}}
    if current(ChainSettings, app).registry_backend == EVM:
        schedule["agents-follow-registry"] = {"task": "agents.follow_registry", "schedule": FOLLOW_SECONDS}
    return schedule
