"""The EIP-712 signatures of the registry's writes on a chain (`AGENT_REGISTRY_BACKEND=evm`): what each
signer is handed to sign, and the checks of a request carrying a signature before its job starts.

set-card and deregister are signed by the key the contract asks for: the record's owner once one is
named, else the agent. The signer first asks for the typed data of its write (`typed_data_to_sign`:
`Register` while its DID has no record on chain, else `SetCard`; `Deregister`), with the DID's nonce
read from the contract and a deadline; a caller that does not hold that key (an agent whose record
names an owner on chain, an organisation whose agent's record does not name it) is refused first
(`RecordSignedByAnother`). The request carrying the signature is checked (`checked_chain_write`):
the signer must be the one the contract will ask for.

Ownership: the contract names an owner with `setOwner(did, owner, ...)` signed by the record's authority (the
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

The jobs that relay these writes are in `app.agents.chain_jobs`. Every call to the node runs with
no database transaction open: a request ends its reads first.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from app.agents.accounts import get_account_by_did, owner_did_of
from app.agents.errors import (
    AlreadyOwned,
    ConsentSignatureStale,
    OwnerNamedRecord,
    OwnerNotNamed,
    RecordSignedByAnother,
    RegistrySignatureExpired,
    RegistrySignatureRefused,
    RegistrySignatureRequired,
)
from app.agents.ethereum import InvalidSignature, recover_digest_signer
from app.agents.models import AgentAccount, Consent
from app.agents.settings import AgentSettings
from app.agents.signing import APPROVE_CONSENT, DEREGISTER, REVOKE_OWNER, SET_OWNER, WriteToSign
from app.chain.registry import ChainRecord, read_chain_record
from app.chain.settings import ChainSettings
from app.chain.typed_data import ZERO_ADDRESS, registry_message, typed_data_digest
from app.db import commit_before_the_edge, utcnow
from app.errors import ValidationFailed
from app.settings import current

# How long a signature the network hands out to sign stays good (its `deadline`): the job must be
# sent before then, so it covers a wait in the queue.
SIGNATURE_LIFETIME = timedelta(hours=1)


def now_seconds() -> int:
    """Now, in the Unix seconds of a signature's deadline."""
    return int(utcnow().timestamp())


def chain_record(did: str) -> ChainRecord:
    """The DID's record on chain, read with no transaction open (the request's reads end first)."""
    commit_before_the_edge("the registry contract is read with no transaction open")
    return read_chain_record(current(AgentSettings).network, did)


def _refuse_owned(record: ChainRecord) -> None:
    if record.owner is not None:
        raise OwnerNamedRecord(owner_did_of(record.owner))


def _typed_data(
    target: AgentAccount, record: ChainRecord, operation: str, uri: str | None, deadline: int
) -> dict[str, Any] | None:
    """The typed data of `operation` on `target`'s record as it is; None when there is nothing to sign
    (deregistering a DID with no record on chain)."""
    chain = current(ChainSettings).require_chain(current(AgentSettings).network)
    common = {"did": target.did, "nonce": record.nonce, "deadline": deadline}
    if operation == DEREGISTER:
        if not record.exists:
            return None
        primary, message = "Deregister", common
    elif record.exists:
        primary, message = "SetCard", {**common, "cardURI": uri}
    else:
        primary, message = "Register", {**common, "agent": target.address, "owner": ZERO_ADDRESS, "cardURI": uri}
    return registry_message(primary, message, chain_id=chain.chain_id, registry_address=chain.registry_address)


def _require_writer(caller: AgentAccount, target: AgentAccount, record: ChainRecord) -> str:
    """The address the contract asks to sign a write of `target`'s record; `RecordSignedByAnother`
    (409) unless the caller holds it."""
    expected = record.authority or target.address
    if caller.address != expected:
        raise RecordSignedByAnother(target.did, expected, owner_did_of(expected))
    return expected


def typed_data_to_sign(caller: AgentAccount, target: AgentAccount, operation: str, uri: str | None) -> WriteToSign:
    """The EIP-712 typed data the caller signs for `operation` (`set-card` with `uri`, or `deregister`).

    Reads the contract (ending the request's reads); `OwnerNamedRecord` for a deregistration of a
    record naming an owner on chain, `RecordSignedByAnother` for a set-card by a caller whose key
    the contract will not take; `ChainUnavailable` when the node does not answer.
    """
    record = chain_record(target.did)
    if operation == DEREGISTER:
        _refuse_owned(record)
        signer = target.address
    else:
        signer = _require_writer(caller, target, record)
    typed = _typed_data(target, record, operation, uri, now_seconds() + int(SIGNATURE_LIFETIME.total_seconds()))
    return WriteToSign(operation, typed, signer if typed is not None else None)


def checked_chain_write(
    caller: AgentAccount,
    target: AgentAccount,
    operation: str,
    signature: str | None,
    deadline: int | None,
    uri: str | None = None,
) -> dict:
    """Check the signature of a set-card or deregister request; what its job's payload needs to relay it.

    Raises `RecordSignedByAnother` (409) for a set-card by a caller whose key the contract will
    not take, `RegistrySignatureRequired` (422, naming the missing field), `RegistrySignatureExpired`
    (422), `RegistrySignatureRefused` (403: signed by another key than the contract will accept),
    `OwnerNamedRecord` (409) for a deregistration of a record naming an owner on chain. A
    deregistration of a DID with no record on chain needs no signature (and relays nothing).
    """
    record = chain_record(target.did)
    if operation == DEREGISTER:
        _refuse_owned(record)
        if not record.exists:
            return {}
        expected = target.address
    else:
        expected = _require_writer(caller, target, record)
    require_signature_fields(signature, deadline)
    assert signature is not None and deadline is not None
    require_fresh(deadline)
    typed = _typed_data(target, record, operation, uri, deadline)
    assert typed is not None
    require_signed_by(typed, signature, expected)
    return {"chain_write": typed["primaryType"], "deadline": deadline, "signature": signature}


def require_fresh(deadline: int) -> None:
    """`RegistrySignatureExpired` (422) once `deadline` has passed."""
    if deadline <= now_seconds():
        raise RegistrySignatureExpired(f"The signature's deadline {deadline} has passed; sign the write again.")


def require_signed_by(typed: dict[str, Any], signature: str, expected: str, *, field: str = "signature") -> None:
    """`RegistrySignatureRefused` (403) unless `signature` of `typed` was made by `expected`;
    `ValidationFailed` (422, on `field`) when it is no signature at all."""
    try:
        signer = recover_digest_signer(typed_data_digest(typed), signature)
    except InvalidSignature as error:
        raise ValidationFailed(errors={field: [str(error)]}) from None
    if signer != expected:
        raise RegistrySignatureRefused(
            f"The {typed['primaryType']} signature was made by {signer}; the registry accepts only {expected}'s.",
            signer=signer,
            expected=expected,
        )


def require_signature_fields(
    signature: str | None, deadline: int | None, *, field: str = "signature", needs_deadline: bool = True
) -> None:
    """`RegistrySignatureRequired` (422) naming what the request lacks: the EIP-712 signature sent as
    `field` and, unless the network already knows it, its deadline."""
    fields = ((field, signature), ("deadline", deadline)) if needs_deadline else ((field, signature),)
    missing = {
        name: ["Required with the evm registry: the EIP-712 signature of the registry write and its deadline."]
        for name, value in fields
        if value is None
    }
    if missing:
        raise RegistrySignatureRequired(
            "Sign the typed data from POST /api/agents/{did}/registry/typed-data and send "
            + " and ".join(missing)
            + ".",
            errors=missing,
        )


def signature_bytes(signature: str) -> bytes:
    """The bytes of a 0x-hex signature, as the contract takes them."""
    return bytes.fromhex(signature.removeprefix("0x"))


# -- ownership: the organisation's request, the agent's approval and revocation ------------------


def _ownership_typed_data(
    target: AgentAccount, owner_address: str, record: ChainRecord, deadline: int
) -> dict[str, Any]:
    """`SetOwner` naming `owner_address` (zero: a release) in `target`'s record as it is now, or
    `Register` of the record naming it while the DID has none on chain."""
    chain = current(ChainSettings).require_chain(current(AgentSettings).network)
    message = {"did": target.did, "owner": owner_address, "nonce": record.nonce, "deadline": deadline}
    primary = "SetOwner"
    if not record.exists:
        primary, message = "Register", {**message, "agent": target.address, "cardURI": ""}
    return registry_message(primary, message, chain_id=chain.chain_id, registry_address=chain.registry_address)


def _refuse_owned_for(target: AgentAccount, record: ChainRecord) -> None:
    if record.owner is not None:
        raise AlreadyOwned(f"{target.did} is already owned by {owner_did_of(record.owner)} on the chain.")


def consent_to_sign(owner: AgentAccount, target: AgentAccount) -> WriteToSign:
    """What organisation `owner` signs to ask to own `target` on chain; `AlreadyOwned` (409) when the
    record on chain names an owner. Reads the contract (ending the request's reads)."""
    record = chain_record(target.did)
    _refuse_owned_for(target, record)
    deadline = now_seconds() + current(AgentSettings).consent_seconds
    return WriteToSign(SET_OWNER, _ownership_typed_data(target, owner.address, record, deadline), owner.address)


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
    _refuse_owned_for(target, record)
    require_fresh(deadline)
    require_signed_by(_ownership_typed_data(target, owner.address, record, deadline), signature, owner.address)
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
    _refuse_owned_for(target, record)
    if deadline <= now_seconds():
        raise ConsentSignatureStale(
            f"{owner_did}'s registry signature expired at {deadline}; the organisation requests the consent again."
        )
    typed = _ownership_typed_data(target, owner.address, record, deadline)
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
    return WriteToSign(REVOKE_OWNER, _ownership_typed_data(target, ZERO_ADDRESS, record, deadline), target.address)


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
    typed = _ownership_typed_data(target, ZERO_ADDRESS, record, deadline)
    require_signed_by(typed, registry_signature, target.address, field="registry_signature")
    return {"chain_write": "SetOwner", "deadline": deadline, "registry_signature": registry_signature}
