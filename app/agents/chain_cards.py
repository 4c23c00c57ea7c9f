"""host-card on the chain (`AGENT_REGISTRY_BACKEND=evm`): the agent's ERC-8004 identity, then its card.

The job registers the agent in the IdentityRegistry with `tokenURI` = the hosted card's public URL
(one transaction per job, `app.chain.relay`), outside any database transaction (`CallOutside`);
once the transaction has its confirmations, the card is stored and published with
`{agentId, agentRegistry}` in its `registrations` and the payer charged, all with the job's final
state. A revert fails the job, so nothing is stored or charged and the credit hold no longer counts.
An agent registered before keeps its `agentId`: hosting its card again sends nothing (the URI is
the same public URL), unless its `tokenURI` says it is no longer active (its card was unpublished):
that URI then names the hosted card again.
"""

from __future__ import annotations

from app.agents.accounts import job_accounts
from app.agents.cards import host_card_from_job, public_card_url
from app.agents.chain_jobs import identity_uri_sent, relayed, transactions_of
from app.agents.models import PublicCard
from app.agents.registration_file import is_inactive_registration_uri
from app.agents.schemas import HostedCardOut
from app.agents.settings import AgentSettings
from app.chain.errors import ChainUnavailable
from app.chain.identity import (
    IDENTITY_STEP,
    IDENTITY_URI_STEP,
    IdentityRegistration,
    read_agent_uri,
    register_identity,
    set_agent_uri,
)
from app.chain.models import AgentIdentity, ChainTransaction
from app.chain.relay import Receipt
from app.chain.settings import ChainSettings
from app.db import utcnow
from app.extensions import db
from app.jobs.models import Job
from app.jobs.runner import TransientError
from app.jobs.service import CallOutside
from app.settings import current


def _hosted(job: Job, identity: AgentIdentity) -> dict:
    hosted = host_card_from_job(job, (int(identity.agent_id), identity.agent_registry))
    return HostedCardOut().dump(hosted)


def host_card_on_chain(job: Job) -> dict | CallOutside:
    """The host-card job with the evm backend (see the module's docstring)."""
    network = current(AgentSettings).network
    agent_registry = current(ChainSettings).require_chain(network).agent_registry_id
    target, _payer = job_accounts(job)
    did = target.did
    known = db.session.get(AgentIdentity, (agent_registry, did))
    job_id, uri = job.id, public_card_url(did)
    if known is not None:
        # Only an unpublished card (no public copy) can have left the tokenURI saying "not active".
        if db.session.get(PublicCard, did) is not None:
            return _hosted(job, known)
        return _hosted_again(job, known, uri, network)

    def call() -> IdentityRegistration:
        try:
            return register_identity(network, job_id, uri)
        except ChainUnavailable as error:  # the node, not the request: the job's retry asks again
            raise TransientError(error.detail) from None

    def record(locked: Job, registration: IdentityRegistration) -> dict:
        identity = AgentIdentity(
            agent_registry=registration.agent_registry,
            did=did,
            agent_id=str(registration.agent_id),
            tx_hash=registration.tx_hash,
            created_at=utcnow(),
        )
        db.session.add(identity)
        sent = db.session.get(ChainTransaction, (locked.id, IDENTITY_STEP))
        receipt = {
            "txHash": registration.tx_hash,
            "nonce": sent.nonce,
            "blockNumber": registration.block_number,
            "status": 1,
            "agentId": registration.agent_id,
            "agentRegistry": registration.agent_registry,
        }
        return {**_hosted(locked, identity), "transaction": receipt}

    return CallOutside(call, record)


def _hosted_again(job: Job, known: AgentIdentity, uri: str, network: str) -> CallOutside:
    """host-card of an agent with an identity and no public copy: its `tokenURI` named the hosted card
    again when it says the agent is no longer active (an unpublished card), else nothing sent."""
    job_id, agent_id, key = job.id, int(known.agent_id), (known.agent_registry, known.did)
    sent = identity_uri_sent(job)

    def send() -> list[tuple[str, Receipt]]:
        if not sent and not is_inactive_registration_uri(read_agent_uri(network, agent_id)):
            return []
        return [(IDENTITY_URI_STEP, set_agent_uri(network, job_id, agent_id, uri))]

    def record(locked: Job, receipts: list[tuple[str, Receipt]]) -> dict:
        hosted = _hosted(locked, db.session.get(AgentIdentity, key))
        return {**hosted, "transactions": transactions_of(receipts)} if receipts else hosted

    return CallOutside(lambda: relayed(send), record)
