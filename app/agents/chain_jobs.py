"""The registry's jobs on a chain (`AGENT_REGISTRY_BACKEND=evm`): set-card, deregister, a consent's
approval and an owner's revocation, each relaying the write its request's signatures were checked
for (`app.agents.chain_signatures`).

Each job relays its write (and for set-card `setAgentURI` of the agent's ERC-8004 identity when it
has one) outside any database transaction (`CallOutside`); once confirmed, the database writes of
the job happen as on the database backend, with the job's final state. A revert fails the job,
which releases its hold; a node that does not answer leaves the job to its retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.agents import cards, registry
from app.agents.accounts import job_accounts
from app.agents.chain_signatures import signature_bytes
from app.agents.consents import (
    approve_consent_from_job,
    release_owner,
    require_approval,
    require_named_owner,
    revoke_owner_from_job,
)
from app.agents.errors import RegistrySignatureRequired
from app.agents.schemas import ApprovedConsentOut, DeregistrationOut, RegisteredCardUriOut, RevokedOwnerOut
from app.agents.settings import AgentSettings
from app.chain.errors import ChainUnavailable
from app.chain.identity import IDENTITY_URI_STEP, set_agent_uri
from app.chain.models import AgentIdentity
from app.chain.registry import RECORD_STEP, relay_registry_write
from app.chain.relay import Receipt
from app.chain.settings import ChainSettings
from app.chain.typed_data import ZERO_ADDRESS
from app.extensions import db
from app.jobs.models import Job
from app.jobs.runner import TransientError
from app.jobs.service import CallOutside
from app.settings import current


def relayed(send: Callable[[], list[tuple[str, Receipt]]]) -> list[tuple[str, Receipt]]:
    """Run `send()` (the job's chain writes); a node that does not answer leaves the job to its retry."""
    try:
        return send()
    except ChainUnavailable as error:
        raise TransientError(error.detail) from None


def transactions_of(receipts: list[tuple[str, Receipt]]) -> list[dict[str, Any]]:
    """The `transactions` of a job's result: each relayed step and its receipt."""
    return [
        {"step": step, "txHash": receipt.tx_hash, "blockNumber": receipt.block_number, "status": receipt.status}
        for step, receipt in receipts
    ]


def set_card_on_chain(job: Job) -> CallOutside:
    """The set-card job with the evm backend (see the module's docstring)."""
    target, _payer = job_accounts(job)
    payload = job.payload
    if "chain_write" not in payload:
        raise RegistrySignatureRequired("The set-card was accepted without the agent's signature; send it again.")
    network = current(AgentSettings).network
    agent_registry = current(ChainSettings).require_chain(network).agent_registry_id
    identity = db.session.get(AgentIdentity, (agent_registry, target.did))
    agent_id = None if identity is None else int(identity.agent_id)
    did, uri, deadline = target.did, payload["uri"], payload["deadline"]
    signature = signature_bytes(payload["signature"])
    if payload["chain_write"] == "Register":
        function, args = "register", [did, target.address, ZERO_ADDRESS, uri, deadline, signature, b""]
    else:
        function, args = "setCard", [did, uri, deadline, signature]
    job_id = job.id

    def send() -> list[tuple[str, Receipt]]:
        receipts = [(RECORD_STEP, relay_registry_write(network, job_id, function, args))]
        if agent_id is not None:
            receipts.append((IDENTITY_URI_STEP, set_agent_uri(network, job_id, agent_id, uri)))
        return receipts

    def record(locked: Job, receipts: list[tuple[str, Receipt]]) -> dict:
        done = RegisteredCardUriOut().dump(cards.set_card_from_job(locked))
        return {**done, "transactions": transactions_of(receipts)}

    return CallOutside(lambda: relayed(send), record)


def deregister_on_chain(job: Job) -> dict | CallOutside:
    """The deregister job with the evm backend: the record on chain goes first, then Tessera's as today."""
    target, _payer = job_accounts(job)
    registry.refuse_if_owner_named(target.did)  # before anything is sent
    payload = job.payload
    if "chain_write" not in payload:  # the DID had no record on chain when the request was checked
        return DeregistrationOut().dump(registry.deregister_from_job(job))
    network, job_id = current(AgentSettings).network, job.id
    args = [target.did, payload["deadline"], signature_bytes(payload["signature"])]

    def send() -> list[tuple[str, Receipt]]:
        return [(RECORD_STEP, relay_registry_write(network, job_id, "deregister", args))]

    def record(locked: Job, receipts: list[tuple[str, Receipt]]) -> dict:
        done = DeregistrationOut().dump(registry.deregister_from_job(locked))
        return {**done, "transactions": transactions_of(receipts)}

    return CallOutside(lambda: relayed(send), record)


def approve_consent_on_chain(job: Job) -> CallOutside:
    """The approve-consent job with the evm backend (see the module's docstring)."""
    approval = require_approval(job)
    payload, consent, target, owner = job.payload, approval.consent, approval.target, approval.owner
    if "chain_write" not in payload:
        raise RegistrySignatureRequired(
            "The approval was accepted without the agent's registry signature; approve again."
        )
    did, deadline = target.did, consent.registry_deadline
    signatures = [signature_bytes(payload["registry_signature"]), signature_bytes(consent.registry_signature or "")]
    if payload["chain_write"] == "Register":
        function, args = "register", [did, target.address, owner.address, "", deadline, *signatures]
    else:
        function, args = "setOwner", [did, owner.address, deadline, *signatures]
    network, job_id = current(AgentSettings).network, job.id

    def send() -> list[tuple[str, Receipt]]:
        return [(RECORD_STEP, relay_registry_write(network, job_id, function, args))]

    def record(locked: Job, receipts: list[tuple[str, Receipt]]) -> dict:
        done = ApprovedConsentOut().dump(approve_consent_from_job(locked))
        return {**done, "transactions": transactions_of(receipts)}

    return CallOutside(lambda: relayed(send), record)


def revoke_owner_on_chain(job: Job) -> dict | CallOutside:
    """The revoke-owner job with the evm backend: the owner is released on chain first, then in
    Tessera's tables as today (at once when the record on chain named no owner)."""
    target = require_named_owner(job)
    payload = job.payload
    if "chain_write" not in payload:
        return RevokedOwnerOut().dump(revoke_owner_from_job(job))
    args = [target.did, ZERO_ADDRESS, payload["deadline"], signature_bytes(payload["registry_signature"]), b""]
    network, job_id = current(AgentSettings).network, job.id

    def send() -> list[tuple[str, Receipt]]:
        return [(RECORD_STEP, relay_registry_write(network, job_id, "setOwner", args))]

    def record(locked: Job, receipts: list[tuple[str, Receipt]]) -> dict:
        # The chain no longer names the owner (nor, once followed, the index): no check again here.
        done = RevokedOwnerOut().dump(release_owner(job_accounts(locked)[0], locked.payload["owner"]))
        return {**done, "transactions": transactions_of(receipts)}

    return CallOutside(lambda: relayed(send), record)
