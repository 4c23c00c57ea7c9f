"""Accounts of the agent network: sign-in challenges, sessions, and who may act for a DID.

Services flush but never commit: a request or a job owns the transaction.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.agents import ethereum
from app.agents.errors import AccountDeactivated, AuthenticationFailed, DidDeactivated, NotAllowedForDid, UnknownDid
from app.agents.models import AGENT, ORGANISATION, AgentAccount, AgentSession, AuthChallenge, RegistryRecord
from app.agents.settings import AgentSettings
from app.agents.siwe import InvalidSiweMessage, SiweMessage, parse_message
from app.db import as_utc, utcnow
from app.dids.method import is_network_did, new_network_did
from app.errors import ValidationFailed
from app.extensions import db
from app.jobs.models import Job
from app.jobs.service import enqueue_job
from app.security import hash_secret, random_token
from app.settings import current

_STATEMENT = "Sign in to the Tessera agent network."


def dialect_insert():
    """The dialect's INSERT with ``on_conflict_do_nothing`` (PostgreSQL or SQLite)."""
    return postgresql_insert if db.session.get_bind().dialect.name == "postgresql" else sqlite_insert


def _locked(condition: ColumnElement[bool]) -> AgentAccount:
    """The one account matching ``condition``, read afresh and locked until the transaction ends."""
    return db.session.execute(
        select(AgentAccount).where(condition).with_for_update().execution_options(populate_existing=True)
    ).scalar_one()


def get_account_by_did(did: str) -> AgentAccount | None:
    """The account bound to ``did``, or None."""
    return db.session.execute(select(AgentAccount).where(AgentAccount.did == did)).scalar_one_or_none()


def owner_did_of(address: str) -> str:
    """The DID of the account of `address` (a record's owner on chain), else the address itself."""
    account = db.session.execute(select(AgentAccount).where(AgentAccount.address == address)).scalar_one_or_none()
    return account.did if account is not None and account.did else address


def lock_or_create_account(address: str) -> AgentAccount:
    """The account of ``address``, created as an agent if new, locked until the transaction ends.

    Concurrent first uses of one address race on the unique address: the insert does nothing
    when another transaction got there first, and the locking read then waits for that row.
    """
    db.session.execute(
        dialect_insert()(AgentAccount)
        .values(address=address, kind=AGENT, balance=0, created_at=utcnow())
        .on_conflict_do_nothing(index_elements=[AgentAccount.address])
    )
    return _locked(AgentAccount.address == address)


def lock_account(account_id: int) -> AgentAccount:
    """The account ``account_id``, locked until the transaction ends."""
    return _locked(AgentAccount.id == account_id)


def checked_address(address: str) -> str:
    """``address`` in EIP-55 form; ``ValidationFailed`` (422) for anything else."""
    try:
        return ethereum.parse_address(address)
    except ethereum.InvalidAddress as exc:
        raise ValidationFailed(errors={"address": [str(exc)]}) from exc


def set_account_kind(address: str, kind: str) -> AgentAccount:
    """Make an account an agent or an organisation (created for the address if new); for operators."""
    if kind not in (AGENT, ORGANISATION):
        raise ValidationFailed(errors={"kind": ["Must be agent or organisation."]})
    account = lock_or_create_account(checked_address(address))
    account.kind = kind
    db.session.flush()
    return account


def _bind_did(account: AgentAccount, now: datetime) -> AgentAccount:
    """Give ``account`` a fresh DID unless it has one; returns the account as stored.

    The update only applies to a row still without a DID, so of concurrent first sign-ins one
    DID wins and every caller reads that one back.
    """
    if account.did is None:
        db.session.execute(
            update(AgentAccount)
            .where(AgentAccount.id == account.id, AgentAccount.did.is_(None))
            .values(did=new_network_did(), did_bound_at=now)
            .execution_options(synchronize_session=False)
        )
        db.session.refresh(account)
    return account


# -- sign-in -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class IssuedChallenge:
    """A stored challenge as the network announces it: the message, its nonce and chain apart."""

    message: str
    nonce: str
    chain_id: int
    expires_at: datetime


def issue_challenge(address: str) -> IssuedChallenge:
    """Store and return an EIP-4361 challenge for ``address`` (any case; normalised to EIP-55).

    Its chain id (``AGENT_CHAIN_ID``) is also announced beside the message, so a client learns
    the network's chain from the network and refuses a message that names another."""
    settings = current(AgentSettings)
    checksummed = checked_address(address)
    now = utcnow().replace(microsecond=0)
    message = SiweMessage(
        domain=urlparse(settings.network_url).netloc,
        address=checksummed,
        statement=_STATEMENT,
        uri=f"{settings.network_url}/api/auth/verify",
        chain_id=settings.chain_id,
        nonce=secrets.token_hex(16),
        issued_at=now,
        expiration_time=now + settings.challenge_lifetime,
    )
    challenge = AuthChallenge(
        nonce=message.nonce,
        address=checksummed,
        message=message.to_text(),
        created_at=now,
        expires_at=message.expiration_time,
    )
    db.session.add(challenge)
    db.session.flush()
    return IssuedChallenge(challenge.message, challenge.nonce, message.chain_id, challenge.expires_at)


@dataclass(frozen=True)
class IssuedSession:
    """A session just created: the bearer token is only available here."""

    token: str
    expires_at: datetime
    account: AgentAccount
    token_type: str = "Bearer"


def verify_challenge(message_text: str, signature: str) -> IssuedSession:
    """Check a signed challenge, spend its nonce, bind the DID on first use and open a session.

    Raises ``AuthenticationFailed`` for a malformed, foreign, expired, reused or wrongly signed
    message and ``AccountDeactivated`` for the key of a deregistered DID; the nonce is spent only
    by a verified signature.
    """
    settings = current(AgentSettings)
    try:
        message = parse_message(message_text)
        message.check(domain=urlparse(settings.network_url).netloc, chain_id=settings.chain_id, now=utcnow(), uri=None)
    except InvalidSiweMessage as exc:
        raise AuthenticationFailed(f"The sign-in message is not acceptable: {exc}") from exc
    challenge = db.session.execute(
        select(AuthChallenge).where(AuthChallenge.nonce == message.nonce).with_for_update()
    ).scalar_one_or_none()
    if (
        challenge is None
        or challenge.used_at is not None
        or challenge.message != message_text
        or as_utc(challenge.expires_at) <= utcnow()
    ):
        raise AuthenticationFailed("The challenge is unknown, expired or already used; request a new one.")
    try:
        signer = ethereum.recover_personal_signer(message_text, signature)
    except ethereum.InvalidSignature as exc:
        raise AuthenticationFailed(f"The signature is not acceptable: {exc}") from exc
    if signer != challenge.address:
        raise AuthenticationFailed("The signature was not made by the challenged address.")
    now = utcnow()
    spent = db.session.execute(
        AuthChallenge.__table__.update()
        .where(AuthChallenge.nonce == challenge.nonce, AuthChallenge.used_at.is_(None))
        .values(used_at=now)
    )
    if spent.rowcount != 1:
        raise AuthenticationFailed("The challenge was already used; request a new one.")
    account = lock_or_create_account(signer)
    if account.deactivated_at is not None:
        # The signature proved the key, so naming its own DID reveals nothing to anyone else.
        raise AccountDeactivated(
            "The DID of this key was deregistered; the key can no longer sign in.", did=account.did
        )
    account = _bind_did(account, now)
    token = random_token(32)
    expires_at = now + settings.session_lifetime
    db.session.add(
        AgentSession(token_hash=hash_secret(token), account_id=account.id, created_at=now, expires_at=expires_at)
    )
    db.session.flush()
    return IssuedSession(token=token, expires_at=expires_at, account=account)


def authenticate_session(token: str, *, allow_deactivated: bool = False) -> AgentAccount:
    """The account of a live session token; ``AuthenticationFailed`` otherwise.

    The sessions of a deregistered account are revoked (``AccountDeactivated``); with
    ``allow_deactivated`` they still identify it until they expire, for reading its own jobs.
    """
    row = db.session.execute(
        select(AgentSession, AgentAccount)
        .join(AgentAccount, AgentAccount.id == AgentSession.account_id)
        .where(AgentSession.token_hash == hash_secret(token))
    ).first()
    if row is None or as_utc(row[0].expires_at) <= utcnow():
        raise AuthenticationFailed("The session token is unknown or expired; authenticate again.")
    if row[1].deactivated_at is not None and not allow_deactivated:
        raise AccountDeactivated("The account was deregistered; its sessions are revoked.")
    return row[1]


# -- authorisation for a DID -------------------------------------------------------------------


def require_target(did: str) -> AgentAccount:
    """The active account of ``did``; ``UnknownDid`` (404) or ``DidDeactivated`` (410) otherwise."""
    target = get_account_by_did(did) if is_network_did(did) else None
    if target is None:
        raise UnknownDid(f"No agent has the DID {did}.")
    if target.deactivated_at is not None:
        raise DidDeactivated(f"The DID {did} was deregistered.")
    return target


def get_record(did: str) -> RegistryRecord | None:
    """The registry record of ``did``, or None."""
    return db.session.get(RegistryRecord, did)


def ensure_record(target: AgentAccount) -> RegistryRecord:
    """The registry record of ``target``, created empty if it has none yet."""
    record = get_record(target.did)
    if record is None:
        now = utcnow()
        record = RegistryRecord(did=target.did, address=target.address, created_at=now, updated_at=now)
        db.session.add(record)
        db.session.flush()
    return record


def authorize_for_did(caller: AgentAccount, did: str) -> AgentAccount:
    """Return the target account if ``caller`` is that agent or its consented owner organisation.

    Raises ``UnknownDid`` (404), ``DidDeactivated`` (410) or ``NotAllowedForDid`` (403).
    """
    target = require_target(did)
    if target.id == caller.id:
        return target
    record = get_record(did)
    if caller.kind == ORGANISATION and record is not None and record.owner_did == caller.did:
        return target
    raise NotAllowedForDid("You may act only for your own DID or for agents you own with their consent.")


def start_job(kind: str, caller: AgentAccount, target: AgentAccount, **payload: Any) -> Job:
    """Enqueue job ``kind`` that ``caller`` started for ``target`` (see ``job_accounts``)."""
    return enqueue_job(
        kind, {"target_id": target.id, "payer_id": caller.id, "did": target.did, **payload}, agent_did=caller.did
    )


def job_accounts(job: Job) -> tuple[AgentAccount, AgentAccount]:
    """Lock the job's target then its payer (a fixed order, so concurrent jobs cannot deadlock).

    The permission checked when the job was accepted is checked again: an owner revoked or
    deregistered while the job waited may no longer act for the agent.
    """
    target = lock_account(int(job.payload["target_id"]))
    payer = target if job.payload["payer_id"] == target.id else lock_account(int(job.payload["payer_id"]))
    if target.deactivated_at is not None:
        raise DidDeactivated(f"The DID {target.did} was deregistered.")
    if payer.deactivated_at is not None:
        raise DidDeactivated(f"The DID {payer.did} was deregistered.")
    if payer.id != target.id:
        record = get_record(target.did)
        if payer.kind != ORGANISATION or record is None or record.owner_did != payer.did:
            raise NotAllowedForDid(f"{payer.did} no longer owns {target.did}.")
    return target, payer
