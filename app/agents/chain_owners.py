"""Ownership on the chain (`AGENT_REGISTRY_BACKEND=evm`): an approved consent names the owner in the
DID's record on chain, a revocation releases it.

The contract names an owner with `setOwner(did, owner, ...)` signed by the record's authority (the
agent, while it has no owner) and by the new owner, both over the same `SetOwner` typed data (the
DID's nonce, a deadline). Each key signs where it already acts:

- the organisation when it requests the consent (`POST /api/consents` carries `signature` and
  `deadline`, the typed data from `POST /api/agents/{did}/registry/typed-data` with
  `{"operation": "set-owner", "owner": ORG_DID}`, its deadline the consent's lifetime away); the
  signature is kept with the consent;
- the agent when it approves (`registry_signature` beside its consent signature, the typed data
  from typed-data with `{"operation": "approve-consent", "consent": ID}`: the very one the
  organisation signed, at the nonce of the record now).

A DID with no record on chain yet is registered by the approval: both sign `Register` naming the
owner, with no card URI. Both signatures are checked before the job starts; the job checks the
consent again, relays the write with no database transaction open (`CallOutside`) and, once
confirmed, writes Tessera's tables as on the database backend. A write of the record between the
request and the approval moves its nonce, so the organisation's signature no longer holds:
`ConsentSignatureStale` (409), and the organisation requests again.

A revocation is the agent's alone: it signs `SetOwner` with owner zero (the contract accepts the
agent's signature for a release), sent as `registry_signature` and `deadline` with the revocation.
"""

from __future__ import annotations

from typing import Any

from app.agents import registry
from app.agents.accounts import get_account_by_did
from app.agents.chain_writes import (
    SIGNATURE_LIFETIME,
    chain_record,
    now_seconds,
    relayed,
    require_fresh,
    require_signature_fields,
    require_signed_by,
    signature_bytes,
    transactions_of,
)
from app.agents.consents import approve_consent_from_job, require_approval, require_named_owner, revoke_owner_from_job
from app.agents.errors import AlreadyOwned, ConsentSignatureStale, OwnerNotNamed, RegistrySignatureRequired
from app.agents.ethereum import InvalidSignature, recover_digest_signer
from app.agents.models import AgentAccount, Consent
from app.agents.schemas import ApprovedConsentOut, RevokedOwnerOut
from app.agents.settings import AgentSettings
from app.agents.signing import APPROVE_CONSENT, REVOKE_OWNER, SET_OWNER, WriteToSign
from app.chain.registry import RECORD_STEP, ChainRecord, relay_registry_write
from app.chain.relay import Receipt
from app.chain.settings import ChainSettings
from app.chain.typed_data import ZERO_ADDRESS, registry_message, typed_data_digest
from app.jobs.models import Job
from app.jobs.service import CallOutside
from app.settings import current


def _typed_data(target: AgentAccount, owner_address: str, record: ChainRecord, deadline: int) -> dict[str, Any]:
    """`SetOwner` naming `owner_address` (zero: a release) in `target`'s record as it is now, or
    `Register` of the record naming it while the DID has none on chain."""
    chain = current(ChainSettings).require_chain(current(AgentSettings).network)
    message = {"did": target.did, "owner": owner_address, "nonce": record.nonce, "deadline": deadline}
    primary = "SetOwner"
    if not record.exists:
        primary, message = "Register", {**message, "agent": target.address, "cardURI": ""}
    return registry_message(primary, message, chain_id=chain.chain_id, registry_address=chain.registry_address)


def _refuse_owned(target: AgentAccount, record: ChainRecord) -> None:
    if record.owner is not None:
        raise AlreadyOwned(f"{target.did} is already owned by {registry.owner_did_of(record.owner)} on the chain.")


# -- the organisation's request ------------------------------------------------------------------


def consent_to_sign(owner: AgentAccount, target: AgentAccount) -> WriteToSign:
    """What organisation `owner` signs to ask to own `target` on chain; `AlreadyOwned` (409) when the
    record on chain names an owner. Reads the contract (ending the request's reads)."""
    record = chain_record(target.did)
    _refuse_owned(target, record)
    deadline = now_seconds() + current(AgentSettings).consent_seconds
    return WriteToSign(SET_OWNER, _typed_data(target, owner.address, record, deadline), owner.address)


def checked_consent_request(
    owner: AgentAccount, target: AgentAccount, signature: str | None, deadline: int | None
) -> dict:
    """Check the organisation's signature naming itself owner of `target`; the consent's columns keeping it.

    Raises `RegistrySignatureRequired` (422), `RegistrySignatureExpired` (422),
    `RegistrySignatureRefused` (403: not the organisation's key), `AlreadyOwned` (409: the record on
    chain names an owner).
    """
    require_signature_fields(signature, deadline)
    assert signature is not None and deadline is not None
    record = chain_record(target.did)
    _refuse_owned(target, record)
    require_fresh(deadline)
    require_signed_by(_typed_data(target, owner.address, record, deadline), signature, owner.address)
    return {"registry_signature": signature, "registry_deadline": deadline}


# -- the agent's approval ------------------------------------------------------------------------


def _consent_write(target: AgentAccount, owner: AgentAccount, consent: Consent) -> dict[str, Any]:
    """The typed data the organisation signed for `consent`, at the record's nonce now; raises
    `ConsentSignatureStale` (409) once its signature no longer holds, `AlreadyOwned` (409) when the
    record on chain names an owner. Reads the contract (ending the request's reads)."""
    signature, deadline, owner_did = consent.registry_signature, consent.registry_deadline, consent.owner_did
    if signature is None or deadline is None:
        raise ConsentSignatureStale(
            f"The consent was requested without {owner_did}'s registry signature (the registry was not on a "
            "chain yet); the organisation requests the consent again."
        )
    record = chain_record(target.did)
    _refuse_owned(target, record)
    if deadline <= now_seconds():
        raise ConsentSignatureStale(
            f"{owner_did}'s registry signature expired at {deadline}; the organisation requests the consent again."
        )
    typed = _typed_data(target, owner.address, record, deadline)
    try:
        signer = recover_digest_signer(typed_data_digest(typed), signature)
    except InvalidSignature:
        signer = None
    if signer != owner.address:
        raise ConsentSignatureStale(
            f"The registry record of {target.did} changed on chain since {owner_did} signed (its nonce is "
            f"{record.nonce} now); the organisation requests the consent again."
        )
    return typed


def approval_to_sign(agent: AgentAccount, consent: Consent) -> WriteToSign:
    """What the agent signs to approve `consent` on chain: the typed data its organisation signed."""
    owner = get_account_by_did(consent.owner_did)
    if owner is None:
        raise ConsentSignatureStale(f"The organisation {consent.owner_did} has no account any more.")
    return WriteToSign(APPROVE_CONSENT, _consent_write(agent, owner, consent), agent.address)


def checked_consent_approval(agent: AgentAccount, consent: Consent, registry_signature: str | None) -> dict:
    """Check both signatures of the write approving `consent`; what the job's payload needs to relay it.

    Raises `RegistrySignatureRequired` (422: no `registry_signature`), `ConsentSignatureStale` (409:
    the organisation's no longer holds), `AlreadyOwned` (409), `RegistrySignatureRefused` (403: the
    agent's is another key's).
    """
    require_signature_fields(registry_signature, None, field="registry_signature", needs_deadline=False)
    assert registry_signature is not None
    owner = get_account_by_did(consent.owner_did)
    if owner is None:
        raise ConsentSignatureStale(f"The organisation {consent.owner_did} has no account any more.")
    typed = _consent_write(agent, owner, consent)
    require_signed_by(typed, registry_signature, agent.address, field="registry_signature")
    return {"chain_write": typed["primaryType"], "registry_signature": registry_signature}


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


# -- the agent's revocation ----------------------------------------------------------------------


def _require_named(target: AgentAccount, owner_did: str, record: ChainRecord) -> None:
    owner = get_account_by_did(owner_did)
    if owner is None or owner.address != record.owner:
        raise OwnerNotNamed(f"The registry record of {target.did} on chain does not name {owner_did} as owner.")


def release_to_sign(target: AgentAccount, owner_did: str) -> WriteToSign:
    """What the agent signs to release `owner_did` on chain: nothing when the record there names no
    owner, `OwnerNotNamed` (409) when it names another."""
    record = chain_record(target.did)
    if record.owner is None:
        return WriteToSign(REVOKE_OWNER, None, None)
    _require_named(target, owner_did, record)
    deadline = now_seconds() + int(SIGNATURE_LIFETIME.total_seconds())
    return WriteToSign(REVOKE_OWNER, _typed_data(target, ZERO_ADDRESS, record, deadline), target.address)


def checked_owner_release(
    target: AgentAccount, owner_did: str, registry_signature: str | None, deadline: int | None
) -> dict:
    """Check the agent's signature releasing `owner_did`; what the job's payload needs to relay it
    (nothing when the record on chain names no owner).

    Raises `RegistrySignatureRequired` (422), `RegistrySignatureExpired` (422),
    `RegistrySignatureRefused` (403), `OwnerNotNamed` (409: the chain names another owner).
    """
    record = chain_record(target.did)
    if record.owner is None:
        return {}
    _require_named(target, owner_did, record)
    require_signature_fields(registry_signature, deadline, field="registry_signature")
    assert registry_signature is not None and deadline is not None
    require_fresh(deadline)
    typed = _typed_data(target, ZERO_ADDRESS, record, deadline)
    require_signed_by(typed, registry_signature, target.address, field="registry_signature")
    return {"chain_write": "SetOwner", "deadline": deadline, "registry_signature": registry_signature}


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
        done = RevokedOwnerOut().dump(revoke_owner_from_job(locked))
        return {**done, "transactions": transactions_of(receipts)}

    return CallOutside(lambda: relayed(send), record)
