"""The registry's jobs on a chain (`AGENT_REGISTRY_BACKEND=evm`): set-card, card-unpublish, deregister,
a consent's approval and an owner's revocation, each relaying the write its request's signatures were
checked for (`app.agents.chain_signatures`).

Each job relays its write (and `setAgentURI` of the agent's ERC-8004 identity when it has one: for
set-card its URI; for a deregistration, and an unpublished card the `tokenURI` named, a registration
file saying the agent is no longer active) outside any database transaction (`CallOutside`); once
confirmed, the database writes of the job happen as on the database backend, with the job's final
state. A revert fails the job, which releases its hold; a node that does not answer leaves the job
to its retry.
"""

from __future__ import annotations

import json
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
from app.agents.models import PrivateCard
from app.agents.registration_file import inactive_registration_uri
from app.agents.schemas import (
    ApprovedConsentOut,
    DeregistrationOut,
    RegisteredCardUriOut,
    RevokedOwnerOut,
    UnpublishedCardOut,
)
from app.agents.settings import AgentSettings
from app.chain.errors import ChainUnavailable
from app.chain.identity import IDENTITY_URI_STEP, read_agent_uri, set_agent_uri
from app.chain.models import AgentIdentity, ChainTransaction
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


def agent_identity(did: str) -> AgentIdentity | None:
    """The ERC-8004 identity of `did` in the network's IdentityRegistry, if host-card gave it one."""
    network = current(AgentSettings).network
    return db.session.get(AgentIdentity, (current(ChainSettings).require_chain(network).agent_registry_id, did))


def identity_uri_sent(job: Job) -> bool:
    """Whether a run of `job` already sent its `setAgentURI` (kept going whatever the chain says now)."""
    return db.session.get(ChainTransaction, (job.id, IDENTITY_URI_STEP)) is not None


def _inactive_uri(identity: AgentIdentity, why: str) -> str:
    """The `tokenURI` telling `why` the agent of `identity` is no longer active, named as its card names it."""
    private = db.session.get(PrivateCard, identity.did)
    card = json.loads(private.body.decode("utf-8")) if private is not None else {}
    name = card.get("name") if isinstance(card.get("name"), str) else identity.did
    return inactive_registration_uri(name, why, int(identity.agent_id), identity.agent_registry)


def set_card_on_chain(job: Job) -> CallOutside:
    """The set-card job with the evm backend (see the module's docstring)."""
    target, _payer = job_accounts(job)
    payload = job.payload
    if "chain_write" not in payload:
        raise RegistrySignatureRequired("The set-card was accepted without the agent's signature; send it again.")
    network = current(AgentSettings).network
    identity = agent_identity(target.did)
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


def card_unpublish_on_chain(job: Job) -> dict | CallOutside:
    """The card-unpublish job with the evm backend: when the agent's identity names the public copy
    as its `tokenURI`, that URI first says the agent is no longer active; then Tessera's tables as today."""
    target, _payer = job_accounts(job)
    cards.get_public_card(target.did)  # nothing to unpublish: refused before anything is sent
    identity = agent_identity(target.did)
    if identity is None:
        return UnpublishedCardOut().dump(cards.card_unpublish_from_job(job))
    settings = current(AgentSettings)
    network, job_id, agent_id = settings.network, job.id, int(identity.agent_id)
    public_url, sent = cards.public_card_url(target.did), identity_uri_sent(job)
    why = f"Its card was unpublished from {settings.network_url}: not active until a card is hosted again."
    inactive = _inactive_uri(identity, why)

    def send() -> list[tuple[str, Receipt]]:
        if not sent and read_agent_uri(network, agent_id) != public_url:
            return []  # the tokenURI names another card (a set-card's), which stays where it is
        return [(IDENTITY_URI_STEP, set_agent_uri(network, job_id, agent_id, inactive))]

    def record(locked: Job, receipts: list[tuple[str, Receipt]]) -> dict:
        done = UnpublishedCardOut().dump(cards.card_unpublish_from_job(locked))
        return {**done, "transactions": transactions_of(receipts)}

    return CallOutside(lambda: relayed(send), record)


def deregister_on_chain(job: Job) -> dict | CallOutside:
    """The deregister job with the evm backend: the record on chain goes first and the agent's
    identity then says it is no longer active, then Tessera's tables as today."""
    target, _payer = job_accounts(job)
    registry.refuse_if_owner_named(target.did)  # before anything is sent
    payload = job.payload
    identity = agent_identity(target.did)
    # No record on chain when the request was checked, and no identity: nothing to send.
    if "chain_write" not in payload and identity is None:
        return DeregistrationOut().dump(registry.deregister_from_job(job))
    settings = current(AgentSettings)
    network, job_id = settings.network, job.id
    args = [target.did, payload["deadline"], signature_bytes(payload["signature"])] if "chain_write" in payload else []
    agent_id = None if identity is None else int(identity.agent_id)
    why = f"Deregistered from {settings.network_url}: no longer active."
    inactive = None if identity is None else _inactive_uri(identity, why)

    def send() -> list[tuple[str, Receipt]]:
        receipts = [(RECORD_STEP, relay_registry_write(network, job_id, "deregister", args))] if args else []
        if agent_id is not None and inactive is not None:
            receipts.append((IDENTITY_URI_STEP, set_agent_uri(network, job_id, agent_id, inactive)))
        return receipts

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
