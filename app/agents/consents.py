"""Ownership of agents by organisations: consent requests and approvals, and owner revocation.

An organisation asks an agent to accept it as owner (a consent with a message to sign); the
agent approves by signing it, or later revokes the owner by a signed revocation. The writes
happen in jobs. Services flush but never commit.

With `AGENT_REGISTRY_BACKEND=evm` each also names or releases the owner in the DID's record on the
chain, with the EIP-712 signatures gathered as `app.agents.chain_signatures` tells.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import urlparse

from sqlalchemy import func, select, update

from app.agents import ethereum
from app.agents.accounts import (
    ensure_record,
    get_account_by_did,
    get_record,
    job_accounts,
    owner_did_of,
    require_target,
    start_job,
)
from app.agents.consent_message import (
    ConsentTerms,
    OwnerRevocation,
    format_consent_message,
    format_revocation_message,
)
from app.agents.errors import (
    AlreadyOwned,
    ConsentNotPending,
    NotAllowedForDid,
    NotAnOrganisation,
    OwnerNotNamed,
)
from app.agents.models import APPROVED, ORGANISATION, PENDING, REVOKED, AgentAccount, Consent
from app.agents.settings import AgentSettings
from app.agents.signing import APPROVE_CONSENT, SET_OWNER, WriteToSign
from app.agents.siwe import InvalidSiweMessage, format_date_time, parse_date_time
from app.chain.index import get_indexed_record
from app.chain.settings import EVM, ChainSettings
from app.db import as_utc, utcnow
from app.errors import NotFound, ValidationFailed
from app.extensions import db
from app.jobs.models import Job
from app.settings import current

# Consent ids are 16 random bytes in hex; nothing else names one.
_CONSENT_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class ApprovedConsent:
    """The outcome of an approve-consent job."""

    agent: str
    owner: str
    consent: str


@dataclass(frozen=True)
class Approval:
    """A pending consent an approve-consent job may still carry out: its agent, owner and consent."""

    target: AgentAccount
    owner: AgentAccount
    consent: Consent


@dataclass(frozen=True)
class RevokedOwner:
    """The outcome of a revoke-owner job."""

    agent: str
    revoked_owner: str


def _network_host() -> str:
    return urlparse(current(AgentSettings).network_url).netloc


def consent_url(consent: Consent) -> str:
    """The consent link an organisation hands to the agent."""
    return f"{current(AgentSettings).network_url}/consent/{consent.id}"


def _on_chain() -> bool:
    return current(ChainSettings).registry_backend == EVM


def _requestable(caller: AgentAccount, owner: str, agent: str) -> AgentAccount:
    """The agent ``caller`` (organisation ``owner``) may ask to own, by Tessera's tables."""
    if caller.kind != ORGANISATION:
        raise NotAnOrganisation("Only an organisation account can request ownership of an agent.")
    if owner != caller.did:
        raise NotAllowedForDid("The owner must be the authenticated organisation.")
    target = require_target(agent)
    if target.id == caller.id:
        raise ValidationFailed(errors={"agent": ["An organisation cannot own itself."]})
    record = get_record(agent)
    if record is not None and record.owner_did:
        raise AlreadyOwned(f"{agent} is already owned by {record.owner_did}.")
    return target


def request_consent(
    caller: AgentAccount, owner: str, agent: str, signature: str | None = None, deadline: int | None = None
) -> Consent:
    """As organisation ``owner`` (the caller), ask ``agent`` to accept it as owner.

    On a chain the request also carries the organisation's EIP-712 signature naming itself owner and
    its deadline (`app.agents.chain_signatures.checked_consent_request`), kept with the consent.
    """
    target = _requestable(caller, owner, agent)
    chain_write: dict = {}
    if _on_chain():
        from app.agents.chain_signatures import checked_consent_request  # web3 loads only where a chain is used

        chain_write = checked_consent_request(caller, target, signature, deadline)
    now = utcnow().replace(microsecond=0)
    consent_id = secrets.token_hex(16)
    expires_at = now + current(AgentSettings).consent_lifetime
    message = format_consent_message(
        ConsentTerms(
            network_host=_network_host(),
            agent_did=agent,
            owner_did=owner,
            consent_id=consent_id,
            issued_at=format_date_time(now),
            expires_at=format_date_time(expires_at),
        )
    )
    consent = Consent(
        id=consent_id,
        owner_did=owner,
        agent_did=agent,
        message=message,
        state=PENDING,
        created_at=now,
        expires_at=expires_at,
        **chain_write,
    )
    db.session.add(consent)
    db.session.flush()
    return consent


def get_consent(consent_id: str) -> Consent | None:
    """A consent by id, or None (the consent page is reachable by its unguessable link)."""
    return db.session.get(Consent, consent_id) if _CONSENT_ID.fullmatch(consent_id) else None


def require_consent(consent_id: str) -> Consent:
    """A consent by id for its public page (reachable by its unguessable link); ``NotFound`` otherwise."""
    consent = get_consent(consent_id)
    if consent is None:
        raise NotFound("No such consent.")
    return consent


def get_consent_for(caller: AgentAccount, consent_id: str) -> Consent:
    """A consent the caller is party to (owner or agent); ``NotFound`` otherwise."""
    consent = get_consent(consent_id)
    if consent is None or caller.did not in (consent.owner_did, consent.agent_did):
        raise NotFound("No such consent.")
    return consent


def _approvable(caller: AgentAccount, consent_id: str) -> Consent:
    consent = get_consent_for(caller, consent_id)
    if caller.did != consent.agent_did:
        raise NotAllowedForDid("Only the agent named in the consent can approve it.")
    if consent.state != PENDING or as_utc(consent.expires_at) <= utcnow():
        raise ConsentNotPending("The consent is no longer pending.")
    return consent


def request_consent_approval(
    caller: AgentAccount, consent_id: str, signature: str, registry_signature: str | None = None
) -> Job:
    """As the agent, approve a consent with a personal_sign signature of its message; starts a job.

    On a chain the request also carries the agent's EIP-712 signature of the write the organisation
    signed (`app.agents.chain_signatures.checked_consent_approval`); both are checked here.
    """
    consent = _approvable(caller, consent_id)
    try:
        signer = ethereum.recover_personal_signer(consent.message, signature)
    except ethereum.InvalidSignature as exc:
        raise ValidationFailed(errors={"signature": [str(exc)]}) from exc
    if signer != caller.address:
        raise ValidationFailed(errors={"signature": ["Not signed by the agent's key."]})
    consent_id = consent.id
    chain_write: dict = {}
    if _on_chain():
        from app.agents.chain_signatures import checked_consent_approval  # web3 loads only where a chain is used

        chain_write = checked_consent_approval(caller, consent, registry_signature)
    return start_job(
        "agents.approve_consent", caller, caller, consent_id=consent_id, signature=signature, **chain_write
    )


def require_approval(job: Job) -> Approval:
    """What an approve-consent job carries out; `ConsentNotPending` or `AlreadyOwned` (409) when it no
    longer may (checked again before anything is sent to a chain)."""
    target, _payer = job_accounts(job)
    consent = db.session.get(Consent, job.payload["consent_id"])
    if consent is None or consent.state != PENDING:
        raise ConsentNotPending("The consent is no longer pending.")
    owner = get_account_by_did(consent.owner_did)
    if owner is None or owner.deactivated_at is not None:
        raise ConsentNotPending(f"The organisation {consent.owner_did} was deregistered.")
    record = get_record(target.did)
    if record is not None and record.owner_did and record.owner_did != consent.owner_did:
        raise AlreadyOwned(f"{target.did} is already owned by {record.owner_did}.")
    return Approval(target, owner, consent)


def approve_consent_from_job(job: Job) -> ApprovedConsent:
    """Name the owner in the agent's registry record and mark the consent approved, together."""
    approval = require_approval(job)
    target, consent = approval.target, approval.consent
    record = ensure_record(target)
    now = utcnow()
    record.owner_did = consent.owner_did
    record.updated_at = now
    consent.state, consent.signature, consent.approved_at = APPROVED, job.payload["signature"], now
    db.session.flush()
    return ApprovedConsent(target.did, consent.owner_did, consent.id)


# -- owner revocation --------------------------------------------------------------------------


def _names_owner(did: str, owner: str) -> bool:
    """Whether the registry record of `did` names `owner`: Tessera's own, or on a chain the index's
    record (an organisation's deregistration releases its agents in Tessera's tables only, so the
    chain may still name it: the agent releases it there itself)."""
    record = get_record(did)
    if record is not None and record.owner_did == owner:
        return True
    if not _on_chain():
        return False
    indexed = get_indexed_record(current(AgentSettings).network, did)
    return indexed is not None and indexed.owner_address is not None and owner_did_of(indexed.owner_address) == owner


def _revocable(caller: AgentAccount, did: str, owner: str) -> AgentAccount:
    target = require_target(did)
    if target.id != caller.id:
        raise NotAllowedForDid("Only the agent itself can revoke its owner.")
    if not _names_owner(did, owner):
        raise OwnerNotNamed(f"The registry record of {did} does not name {owner} as owner.")
    return target


def request_owner_revocation(
    caller: AgentAccount,
    did: str,
    owner: str,
    issued_at: str,
    signature: str,
    registry_signature: str | None = None,
    deadline: int | None = None,
) -> Job:
    """As the agent, drop the owner its record names, by a signed revocation; starts a job.

    The agent's key signs ``format_revocation_message`` for this network, agent, owner and
    ``issued_at``; that time must be within ``AGENT_CHALLENGE_SECONDS`` of now and after the
    owner's consent was approved, so a revocation cannot be replayed against a later consent.
    Raises ``NotAllowedForDid`` (403) for anyone but the agent, ``OwnerNotNamed`` (409) when the
    record names another owner or none, ``ValidationFailed`` (422) for the time or signature.
    On a chain whose record names the owner, the request also carries the agent's EIP-712 signature
    releasing it and its deadline (`app.agents.chain_signatures.checked_owner_release`).
    """
    target = _revocable(caller, did, owner)
    try:
        moment = parse_date_time(issued_at)
    except InvalidSiweMessage as exc:
        raise ValidationFailed(errors={"issued_at": [str(exc)]}) from exc
    now = utcnow()
    if abs(moment - now) > current(AgentSettings).challenge_lifetime:
        raise ValidationFailed(errors={"issued_at": ["Must be within a few minutes of now; sign a fresh revocation."]})
    approved = db.session.scalar(
        select(func.max(Consent.approved_at)).where(
            Consent.agent_did == did, Consent.owner_did == owner, Consent.state == APPROVED
        )
    )
    if approved is not None and moment <= as_utc(approved):
        raise ValidationFailed(errors={"issued_at": ["Must be after the owner's consent was approved."]})
    message = format_revocation_message(
        OwnerRevocation(network_host=_network_host(), agent_did=did, owner_did=owner, issued_at=issued_at)
    )
    try:
        signer = ethereum.recover_personal_signer(message, signature)
    except ethereum.InvalidSignature as exc:
        raise ValidationFailed(errors={"signature": [str(exc)]}) from exc
    if signer != caller.address:
        raise ValidationFailed(errors={"signature": ["Not the agent key's signature of the revocation message."]})
    chain_write: dict = {}
    if _on_chain():
        from app.agents.chain_signatures import checked_owner_release  # web3 loads only where a chain is used

        chain_write = checked_owner_release(target, owner, registry_signature, deadline)
    return start_job(
        "agents.revoke_owner", caller, target, owner=owner, issued_at=issued_at, signature=signature, **chain_write
    )


def require_named_owner(job: Job) -> AgentAccount:
    """The agent of a revoke-owner job; `OwnerNotNamed` (409) once its record no longer names the owner
    (checked again before anything is sent to a chain)."""
    target, _payer = job_accounts(job)
    owner = job.payload["owner"]
    if not _names_owner(target.did, owner):
        raise OwnerNotNamed(f"The registry record of {target.did} does not name {owner} as owner.")
    return target


def revoke_owner_from_job(job: Job) -> RevokedOwner:
    """Clear the record's owner and mark its consent revoked, together; no-op refusal if it changed."""
    return release_owner(require_named_owner(job), job.payload["owner"])


def release_owner(target: AgentAccount, owner: str) -> RevokedOwner:
    """Clear `owner` from the record of `target` (unless only the chain named it) and mark its consent
    revoked, together."""
    record = get_record(target.did)
    if record is not None and record.owner_did == owner:
        record.owner_did = None
        record.updated_at = utcnow()
    db.session.execute(
        update(Consent)
        .where(Consent.agent_did == target.did, Consent.owner_did == owner, Consent.state == APPROVED)
        .values(state=REVOKED)
        .execution_options(synchronize_session=False)
    )
    db.session.flush()
    return RevokedOwner(target.did, owner)


# -- what ownership asks to sign on a chain ------------------------------------------------------


def ownership_write_to_sign(
    caller: AgentAccount, did: str, operation: str, owner: str | None, consent_id: str | None
) -> WriteToSign:
    """The EIP-712 typed data of an ownership write of agent `did` and who signs it: the organisation
    `owner` (the caller) asking to own it (`set-owner`), the agent approving consent `consent_id`
    (`approve-consent`), or the agent releasing `owner` (`revoke-owner`). The request's own checks
    come first; nothing to sign on the database backend, or for a release the chain has no owner of.
    """
    if operation == APPROVE_CONSENT:
        if consent_id is None:
            raise ValidationFailed(errors={"consent": ["Required for approve-consent: the consent's id."]})
        consent = _approvable(caller, consent_id)
        if consent.agent_did != did:
            raise NotFound("No such consent.")
    elif owner is None:
        raise ValidationFailed(errors={"owner": [f"Required for {operation}: the owner organisation's DID."]})
    elif operation == SET_OWNER:
        target = _requestable(caller, owner, did)
    else:
        target = _revocable(caller, did, owner)
    if not _on_chain():
        return WriteToSign(operation, None, None)
    from app.agents import chain_signatures  # web3 loads only where a chain is used

    if operation == APPROVE_CONSENT:
        return chain_signatures.approval_to_sign(caller, consent)
    if operation == SET_OWNER:
        return chain_signatures.consent_to_sign(caller, target)
    return chain_signatures.release_to_sign(target, owner)
