"""host-card on the chain (`AGENT_REGISTRY_BACKEND=evm`): the agent's ERC-8004 identity, then its card.

The job registers the agent in the IdentityRegistry with `tokenURI` = the hosted card's public URL
(one transaction per job, `app.chain.relay`), outside any database transaction (`CallOutside`);
once the transaction has its confirmations, the card is stored and published with
`{agentId, agentRegistry}` in its `registrations` and the payer charged, all with the job's final
state. A revert fails the job, so nothing is stored or charged and the credit hold no longer counts.
An agent registered before keeps its `agentId`: hosting its card again sends nothing (the URI is
the same public URL).
"""

from __future__ import annotations

from app.agents.accounts import job_accounts
from app.agents.cards import host_card_from_job, public_card_url
from app.agents.schemas import HostedCardOut
from app.agents.settings import AgentSettings
from app.chain.errors import ChainUnavailable
from app.chain.identity import IDENTITY_STEP, IdentityRegistration, register_identity
from app.chain.models import AgentIdentity, ChainTransaction
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
    if known is not None:
        return _hosted(job, known)
    job_id, uri = job.id, public_card_url(did)

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
            "agentId": str(registration.agent_id),
            "agentRegistry": registration.agent_registry,
        }
        return {**_hosted(locked, identity), "transaction": receipt}

    return CallOutside(call, record)
