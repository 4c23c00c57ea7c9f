"""The agent registry: records, the registry contract, deregistration, and agents' DIDs.

Deregistration happens in a job, which removes the record and both cards, deactivates the DID
and charges the payer together. Services flush but never commit.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime

from flask import Flask
from sqlalchemy import bindparam, delete, exists, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import aliased

from app.agents.accounts import authorize_for_did, get_record, job_accounts, owner_did_of, require_target
from app.agents.cards import card_uri_is_served, public_card_url, validate_card_uri
from app.agents.consents import ownership_write_to_sign
from app.agents.credits import charge, start_paid_job
from app.agents.errors import NotAllowedForDid, OwnerNamedRecord
from app.agents.models import (
    APPROVED,
    PENDING,
    REVOKED,
    AgentAccount,
    AgentSession,
    Consent,
    CreditEntry,
    PrivateCard,
    PublicCard,
    RegistryRecord,
)
from app.agents.settings import AgentSettings
from app.agents.signing import DEREGISTER, OWNERSHIP_OPERATIONS, SET_CARD, WriteToSign
from app.chain.index import get_indexed_record, registry_key
from app.chain.models import AgentIdentity, ChainTransaction, IndexedRecord
from app.chain.settings import EVM, ChainSettings
from app.db import as_utc, commit_before_the_edge, isoformat, utcnow
from app.dialect import DriverStatement
from app.dids.agents import agent_did_document, deactivated_agent_document
from app.dids.resolution import NetworkDid
from app.errors import NotFound
from app.extensions import db
from app.jobs.models import Job
from app.settings import current

REGISTRY_CONTRACT = "agent-registry"


@dataclass(frozen=True)
class Contract:
    """A registry contract and the version this implementation provides."""

    name: str
    version: str


@dataclass(frozen=True)
class CardState:
    """What the full registry view tells of an agent's cards."""

    hosted: bool
    published: bool
    size: int | None
    etag: str | None
    hosted_by: str | None
    public_url: str | None


@dataclass(frozen=True)
class Identity:
    """An agent's ERC-8004 identity: its `agentId` in the IdentityRegistry `agentRegistry`."""

    agent_id: int
    agent_registry: str


@dataclass(frozen=True)
class HistoryEntry:
    """One write of a registry record: a card hosted, a card URI set, a card unpublished, an owner approved."""

    operation: str
    at: datetime
    by: str | None
    job: str | None = None
    charged: int | None = None
    owner: str | None = None
    transactions: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class RegistryView:
    """A registry record; with ``full``, also the account, the cards, the contract, the ERC-8004
    identity (on a chain) and the record's history."""

    record: RegistryRecord
    account: AgentAccount
    full: bool
    blockchain_account_id: str
    card: CardState | None = None
    contract: Contract | None = None
    identity: Identity | None = None
    history: tuple[HistoryEntry, ...] = ()


@dataclass(frozen=True)
class Deregistration:
    """The outcome of a deregister job."""

    did: str
    charged: int
    released_agents: int
    deactivated: bool = True


def current_contract() -> Contract:
    """The agent-registry contract with the version this deployment provides."""
    return Contract(REGISTRY_CONTRACT, current(AgentSettings).registry_version)


def require_contract(name: str) -> Contract:
    """The contract called ``name`` with its version; ``NotFound`` for others.

    With ``AGENT_REGISTRY_BACKEND=evm`` the version is read from the deployed contract, after the
    caller's reads end (``ChainUnavailable`` when the node does not answer).
    """
    if name != REGISTRY_CONTRACT:
        raise NotFound(f"No contract is named {name!r}.")
    if current(ChainSettings).registry_backend == EVM:
        # web3 costs every process seconds of imports; only a network on a chain pays them.
        from app.chain.registry import read_registry_version

        commit_before_the_edge("the registry contract is read with no transaction open")
        return Contract(REGISTRY_CONTRACT, read_registry_version(current(AgentSettings).network))
    return current_contract()


def _on_chain() -> bool:
    return current(ChainSettings).registry_backend == EVM


def _indexed_record(did: str) -> RegistryRecord | None:
    """The record of `did` as Tessera's index of the chain has it (evm), in the shape of Tessera's own."""
    indexed = get_indexed_record(current(AgentSettings).network, did)
    if indexed is None:
        return None
    own = get_record(did)
    return RegistryRecord(
        did=did,
        address=indexed.agent_address,
        owner_did=owner_did_of(indexed.owner_address) if indexed.owner_address else None,
        card_uri=indexed.card_uri or None,
        created_at=own.created_at if own is not None else indexed.updated_at,
        updated_at=indexed.updated_at,
    )


def get_registry_record(did: str) -> RegistryRecord | None:
    """The registry record of `did` as readers see it: from the index of the chain's events with
    `AGENT_REGISTRY_BACKEND=evm`, else Tessera's own (a record built from the index is never stored)."""
    return _indexed_record(did) if _on_chain() else get_record(did)


def get_registry_view(did: str, *, full: bool = False) -> RegistryView:
    """A registry record (``full`` adds the cards, the account and the contract).

    On a chain the full view's contract version is the deployed contract's (`require_contract`: the
    caller's reads end first; ``ChainUnavailable`` when the node does not answer).
    """
    target = require_target(did)
    record = get_registry_record(did)
    if record is None:
        raise NotFound(f"{did} has no registry record yet.")
    account_id = f"eip155:{current(AgentSettings).chain_id}:{record.address}"
    if not full:
        return RegistryView(record, target, full=False, blockchain_account_id=account_id)
    contract = require_contract(REGISTRY_CONTRACT)  # the deployed contract's version on a chain
    identity = _identity_of(did) if _on_chain() else None
    private = db.session.get(PrivateCard, did)
    public = db.session.get(PublicCard, did)
    card = CardState(
        hosted=private is not None,
        published=public is not None,
        size=len(private.body) if private is not None else None,
        etag=private.etag if private is not None else None,
        hosted_by=private.hosted_by_did if private is not None else None,
        public_url=public_card_url(did) if public is not None else None,
    )
    return RegistryView(record, target, True, account_id, card, contract, identity, _history_of(did))


def _identity_of(did: str) -> Identity | None:
    """The ERC-8004 identity `did` has in the network's IdentityRegistry, if host-card gave it one."""
    agent_registry = current(ChainSettings).require_chain(current(AgentSettings).network).agent_registry_id
    known = db.session.get(AgentIdentity, (agent_registry, did))
    return None if known is None else Identity(int(known.agent_id), known.agent_registry)


# What the ledger records of a registry record's writes (each charged, at its price, even when 0).
_RECORD_WRITES = ("host-card", "set-card", "card-unpublish")
_HISTORY_LENGTH = 20


def _history_of(did: str) -> tuple[HistoryEntry, ...]:
    """The newest writes of the record of `did`, newest first: the ledger's charges for it (who paid,
    which job, the job's transactions on a chain) and the approvals naming its owners."""
    payer = aliased(AgentAccount)
    charges = db.session.execute(
        select(CreditEntry.reason, CreditEntry.created_at, payer.did, CreditEntry.job_id, CreditEntry.amount)
        .join(payer, payer.id == CreditEntry.account_id)
        .where(CreditEntry.subject_did == did, CreditEntry.reason.in_(_RECORD_WRITES))
        .order_by(CreditEntry.id.desc())
        .limit(_HISTORY_LENGTH)
    ).all()
    sent: dict[str, list[dict[str, str]]] = {}
    job_ids = [job_id for *_rest, job_id, _amount in charges if job_id]
    if job_ids:
        steps = select(ChainTransaction).where(ChainTransaction.job_id.in_(job_ids))
        for step in db.session.execute(steps.order_by(ChainTransaction.created_at)).scalars():
            sent.setdefault(step.job_id, []).append({"step": step.step, "tx_hash": step.mined_tx_hash or step.tx_hash})
    approvals = db.session.execute(
        select(Consent.approved_at, Consent.owner_did)
        .where(Consent.agent_did == did, Consent.approved_at.is_not(None))
        .order_by(Consent.approved_at.desc())
        .limit(_HISTORY_LENGTH)
    ).all()
    entries = [
        HistoryEntry(reason, at, by, job_id, -amount, transactions=tuple(sent.get(job_id, ())))
        for reason, at, by, job_id, amount in charges
    ] + [HistoryEntry("approve-consent", at, did, owner=owner) for at, owner in approvals]
    return tuple(sorted(entries, key=lambda entry: as_utc(entry.at), reverse=True)[:_HISTORY_LENGTH])


def refuse_if_owner_named(did: str) -> None:
    """``OwnerNamedRecord`` (409) when Tessera's record of ``did`` names an owner organisation."""
    record = get_record(did)
    if record is not None and record.owner_did:
        raise OwnerNamedRecord(record.owner_did)


def _require_self(caller: AgentAccount, did: str) -> AgentAccount:
    target = require_target(did)
    if target.id != caller.id:
        raise NotAllowedForDid("Only the agent itself can deregister its DID.")
    return target


def registry_write_to_sign(
    caller: AgentAccount,
    did: str,
    operation: str,
    uri: str | None = None,
    owner: str | None = None,
    consent_id: str | None = None,
) -> WriteToSign:
    """The EIP-712 typed data the caller signs for a registry write of `did`: `set-card` of `uri`,
    `deregister`, or ownership (`set-owner`, `approve-consent`, `revoke-owner`: see
    `app.agents.consents.ownership_write_to_sign`); nothing to sign on the database backend, or for a
    deregistration of a DID with no record on chain.

    The write's own checks come first (as its request makes them); on a chain, the DID's nonce is
    read from the contract with no transaction open (`ChainUnavailable` when the node does not answer).
    """
    if operation in OWNERSHIP_OPERATIONS:
        return ownership_write_to_sign(caller, did, operation, owner, consent_id)
    if operation == SET_CARD:
        validate_card_uri(uri)
        target = authorize_for_did(caller, did)
    else:
        target = _require_self(caller, did)
        refuse_if_owner_named(did)
    if not _on_chain():
        return WriteToSign(operation, None, None)
    from app.agents.chain_signatures import typed_data_to_sign  # web3 loads only where a chain is used

    return typed_data_to_sign(caller, target, operation, uri)


def request_deregister(
    caller: AgentAccount, did: str, signature: str | None = None, deadline: int | None = None
) -> Job:
    """Check and start self-service deregistration; ``OwnerNamedRecord`` (409) for owned agents.

    On a chain, a DID with a record there also needs the agent's signature of the ``Deregister``
    (see `app.agents.chain_signatures.checked_chain_write`).
    """
    target = _require_self(caller, did)
    refuse_if_owner_named(did)
    chain_write = {}
    if _on_chain():
        from app.agents.chain_signatures import checked_chain_write  # web3 loads only where a chain is used

        chain_write = checked_chain_write(caller, target, DEREGISTER, signature, deadline)
    return start_paid_job("agents.deregister", DEREGISTER, caller, target, **chain_write)


def deregister_from_job(job: Job) -> Deregistration:
    """Remove the registry record and both cards, deactivate the DID and revoke its sessions.

    An organisation's deregistration also releases the agents it owns: their records name no
    owner any more and its consents end. All in one transaction.
    """
    target, payer = job_accounts(job)
    refuse_if_owner_named(target.did)
    charged = charge(payer, "deregister", target.did, job.id)
    now = utcnow()
    for model in (PublicCard, PrivateCard, RegistryRecord):
        db.session.execute(delete(model).where(model.did == target.did))
    # Sessions now only show the account its own jobs (the outcome of this one), and not for long.
    revoked_by = now + current(AgentSettings).challenge_lifetime
    db.session.execute(
        update(AgentSession)
        .where(AgentSession.account_id == target.id, AgentSession.expires_at > revoked_by)
        .values(expires_at=revoked_by)
        .execution_options(synchronize_session=False)
    )
    db.session.execute(
        delete(Consent).where(
            (Consent.agent_did == target.did) | (Consent.owner_did == target.did), Consent.state == PENDING
        )
    )
    released = db.session.execute(
        update(RegistryRecord)
        .where(RegistryRecord.owner_did == target.did)
        .values(owner_did=None, updated_at=now)
        .execution_options(synchronize_session=False)
    ).rowcount
    db.session.execute(
        update(Consent)
        .where(Consent.owner_did == target.did, Consent.state == APPROVED)
        .values(state=REVOKED)
        .execution_options(synchronize_session=False)
    )
    target.deactivated_at = now
    db.session.flush()
    return Deregistration(target.did, charged, released)


# Every row value `find_agent_did` builds an agent's document from (`agent_did_version`): Tessera's
# own record, or with `AGENT_REGISTRY_BACKEND=evm` the index's record of the chain (`contract` its
# registry) and its owner's DID as `owner_did_of` finds it.
_DOCUMENT_INPUTS = DriverStatement(
    select(
        AgentAccount.address,
        AgentAccount.deactivated_at,
        RegistryRecord.owner_did,
        RegistryRecord.card_uri,
        exists().where(PublicCard.did == AgentAccount.did),
    )
    .outerjoin(RegistryRecord, RegistryRecord.did == AgentAccount.did)
    .where(AgentAccount.did == bindparam("did"))
)
_OWNER = aliased(AgentAccount)
_INDEXED_DOCUMENT_INPUTS = DriverStatement(
    select(
        AgentAccount.address,
        AgentAccount.deactivated_at,
        func.coalesce(_OWNER.did, IndexedRecord.owner_address).label("owner_did"),
        IndexedRecord.card_uri,
        exists().where(PublicCard.did == AgentAccount.did),
    )
    .outerjoin(
        IndexedRecord, (IndexedRecord.did == AgentAccount.did) & (IndexedRecord.contract == bindparam("contract"))
    )
    .outerjoin(_OWNER, _OWNER.address == IndexedRecord.owner_address)
    .where(AgentAccount.did == bindparam("did"))
)


def agent_did_version(did: str, connection: Connection, app: Flask) -> Hashable | None:
    """What the DID document `find_agent_did` gives for `did` is built from (one prebuilt
    statement through `connection`, and the settings it reads): equal versions, equal documents.
    None when `did` is no active agent's. Kept beside the builder: an input added there is added here.
    """
    chain_settings = current(ChainSettings, app)
    settings = current(AgentSettings, app)
    if chain_settings.registry_backend == EVM:
        contract = registry_key(chain_settings.chain(settings.network))
        row = _INDEXED_DOCUMENT_INPUTS.first(connection, {"did": did, "contract": contract})
    else:
        contract, row = None, _DOCUMENT_INPUTS.first(connection, {"did": did})
    if row is None or row.deactivated_at is not None:
        return None
    return (*row, contract, settings.chain_id, settings.network_url)


def find_agent_did(did: str) -> NetworkDid | None:
    """The DID of an agent account for DID resolution (with its AgentService once a card URI is set)."""
    row = db.session.execute(
        select(AgentAccount, RegistryRecord)
        .outerjoin(RegistryRecord, RegistryRecord.did == AgentAccount.did)
        .where(AgentAccount.did == did)
    ).first()
    if row is None:
        return None
    account, record = row
    metadata: dict[str, str | bool | None] = {"created": isoformat(account.did_bound_at)}
    if account.deactivated_at is not None:
        metadata.update({"deactivated": True, "updated": isoformat(account.deactivated_at)})
        return NetworkDid(deactivated_agent_document(did), metadata, deactivated=True)
    if _on_chain():
        record = _indexed_record(did)
    owner_did = card_uri = None
    if record is not None:
        metadata["updated"] = isoformat(record.updated_at)
        owner_did = record.owner_did
        # A registered URI naming this network's own public copy is only advertised while that copy is served.
        if record.card_uri and card_uri_is_served(did, record.card_uri):
            card_uri = record.card_uri
    document = agent_did_document(
        did, account.address, current(AgentSettings).chain_id, owner_did=owner_did, card_uri=card_uri
    )
    return NetworkDid(document, metadata)
