"""set-card and deregister on the chain (`AGENT_REGISTRY_BACKEND=evm`), each authorised by the EIP-712
signature of the key the contract asks for: the record's owner once one is named, else the agent.

The signer first asks for the typed data of its write (`typed_data_to_sign`: `Register` while its
DID has no record on chain, else `SetCard`; `Deregister`), with the DID's nonce read from the
contract and a deadline, and signs it with its key; a caller that does not hold that key (an agent
whose record names an owner on chain, an organisation whose agent's record does not name it) is
refused first (`RecordSignedByAnother`). The request carrying the signature is checked before its
job starts (`checked_chain_write`): the signer must be the one the contract will ask for. The job
then relays the write, and for set-card `setAgentURI` of the agent's ERC-8004 identity when it has
one, outside any database transaction (`CallOutside`); once confirmed, the database writes of the
job happen as on the database backend, with the job's final state. A revert fails the job, which
releases its hold.

Every call to the node runs with no database transaction open: a request ends its reads first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from app.agents import cards, registry
from app.agents.accounts import job_accounts
from app.agents.errors import (
    OwnerNamedRecord,
    RecordSignedByAnother,
    RegistrySignatureExpired,
    RegistrySignatureRefused,
    RegistrySignatureRequired,
)
from app.agents.ethereum import InvalidSignature, recover_digest_signer
from app.agents.models import AgentAccount
from app.agents.registry import DEREGISTER
from app.agents.schemas import DeregistrationOut, RegisteredCardUriOut
from app.agents.settings import AgentSettings
from app.agents.signing import WriteToSign
from app.chain.errors import ChainUnavailable
from app.chain.identity import IDENTITY_URI_STEP, set_agent_uri
from app.chain.models import AgentIdentity
from app.chain.registry import RECORD_STEP, ChainRecord, read_chain_record, relay_registry_write
from app.chain.relay import Receipt
from app.chain.settings import ChainSettings
from app.chain.typed_data import ZERO_ADDRESS, registry_message, typed_data_digest
from app.db import commit_before_the_edge, utcnow
from app.errors import ValidationFailed
from app.extensions import db
from app.jobs.models import Job
from app.jobs.runner import TransientError
from app.jobs.service import CallOutside
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
        raise OwnerNamedRecord(registry.owner_did_of(record.owner))


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
        raise RecordSignedByAnother(target.did, expected, registry.owner_did_of(expected))
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


def relayed(send: Callable[[], list[tuple[str, Receipt]]]) -> list[tuple[str, Receipt]]:
    """Run `send()` (the job's chain writes); a node that does not answer leaves the job to its retry."""
    try:
        return send()
    except ChainUnavailable as error:
        raise TransientError(error.detail) from None


def signature_bytes(signature: str) -> bytes:
    """The bytes of a 0x-hex signature, as the contract takes them."""
    return bytes.fromhex(signature.removeprefix("0x"))


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
