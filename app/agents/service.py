"""Use cases of the agent network: authentication, credits, cards, registry, consents, DIDs.

Services flush but never commit: a request or a job owns the transaction. Every registry or
card write happens in a job (``*_from_job``), so the card's private copy, its public copy and
the charge commit together, and deregistration removes the record and both cards together.
Request-time functions (``request_*``) check everything that can be checked up front — size,
shape, permission, credits — so a refused request writes nothing, then enqueue the job. An
accepted paid job holds its price (``CreditHold``) from the moment it is accepted: the job's
success turns the hold into the charge, and a failed job's hold no longer counts, so a ``202``
always means the job can pay.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlparse, urlsplit

from flask import current_app
from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.agents import ethereum
from app.agents.consent_message import (
    ConsentTerms,
    OwnerRevocation,
    format_consent_message,
    format_revocation_message,
)
from app.agents.errors import (
    AccountDeactivated,
    AlreadyOwned,
    AuthenticationFailed,
    CardNotFound,
    CardTooLarge,
    ClaimUnavailable,
    ConsentNotPending,
    DidDeactivated,
    InsufficientCredits,
    InvalidCard,
    NotAllowedForDid,
    NotAnOrganisation,
    OwnerNamedRecord,
    OwnerNotNamed,
    UnknownDid,
)
from app.agents.models import (
    AGENT,
    APPROVED,
    ORGANISATION,
    PENDING,
    REVOKED,
    AgentAccount,
    AgentSession,
    AuthChallenge,
    Consent,
    CreditEntry,
    CreditHold,
    PrivateCard,
    PublicCard,
    RegistryRecord,
    SpentClaimToken,
)
from app.agents.registration_file import registration_file_errors
from app.agents.siwe import InvalidSiweMessage, SiweMessage, format_date_time, parse_date_time, parse_message
from app.db import as_utc, isoformat, utcnow
from app.dids.method import did_method, is_network_did, new_network_did
from app.errors import NotFound, ValidationFailed
from app.extensions import db
from app.jobs.models import FAILED, QUEUED, RUNNING, SUCCEEDED, Job
from app.jobs.service import enqueue_job
from app.security import hash_secret, random_token
from app.users.service import user_did_document

MAX_CARD_BYTES = 16384
MAX_CARD_URI_BYTES = 2048
CARD_URI_SCHEMES = ("https", "http")
REGISTRY_CONTRACT = "agent-registry"
DEFAULT_PRICES = {"host-card": 10, "set-card": 5, "card-unpublish": 1, "deregister": 0}
DID_CONTEXTS = ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/secp256k1recovery-2020/v2"]
DID_RESOLUTION_CONTEXT = "https://w3id.org/did-resolution/v1"
_DID_SYNTAX = re.compile(r"^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$")
# Used with fullmatch: `$` alone also matches before a trailing newline.
_ABSOLUTE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s\x00-\x1f\x7f]+$")
_STATEMENT = "Sign in to the Tessera agent network."
# Consent ids are 16 random bytes in hex; nothing else names one.
_CONSENT_ID = re.compile(r"[0-9a-f]{32}")


# -- configuration -----------------------------------------------------------------------------


def setting(name: str, default: Any) -> Any:
    """A setting of the agent network: the app config, else the environment, else ``default``.

    Values from the environment are text; callers convert them.
    """
    if current_app.config.get(name) not in (None, ""):
        return current_app.config[name]
    return os.environ.get(name) or default


def chain_id() -> int:
    """The EIP-155 chain id used in challenges and ``blockchainAccountId`` (``AGENT_CHAIN_ID``)."""
    return int(setting("AGENT_CHAIN_ID", 1))


def network_url() -> str:
    """The public URL of the network (``AGENT_NETWORK_URL``, default ``BASE_URL``)."""
    return str(setting("AGENT_NETWORK_URL", current_app.config["BASE_URL"])).rstrip("/")


def is_testnet() -> bool:
    """Whether this deployment is a testnet (``AGENT_NETWORK``: ``testnet`` or ``production``).

    Only an explicit ``testnet`` is one; the embedded default sets it (see ``app.config``).
    """
    return setting("AGENT_NETWORK", "production") == "testnet"


def prices() -> dict[str, int]:
    """The price list in credits (``AGENT_PRICES``, a mapping or JSON, overrides single entries)."""
    overrides = setting("AGENT_PRICES", {})
    if isinstance(overrides, str):
        overrides = json.loads(overrides)
    return {**DEFAULT_PRICES, **{name: int(price) for name, price in overrides.items()}}


def registry_contract_version() -> str:
    """The version of the agent-registry contract this implementation provides."""
    return str(setting("AGENT_REGISTRY_VERSION", "1.7.0"))


def require_contract(name: str) -> dict[str, str]:
    """The contract called ``name`` with its version (``{name, version}``); ``NotFound`` for others."""
    if name != REGISTRY_CONTRACT:
        raise NotFound(f"No contract is named {name!r}.")
    return {"name": REGISTRY_CONTRACT, "version": registry_contract_version()}


def _seconds(name: str, default: int) -> timedelta:
    return timedelta(seconds=int(setting(name, default)))


# -- accounts and authentication ---------------------------------------------------------------


def get_account_by_did(did: str) -> AgentAccount | None:
    """The account bound to ``did``, or None."""
    return db.session.execute(select(AgentAccount).where(AgentAccount.did == did)).scalar_one_or_none()


def _lock_or_create_account(address: str) -> AgentAccount:
    """The account of ``address``, created as an agent if new, locked until the transaction ends.

    Concurrent first uses of one address race on the unique address: the insert does nothing
    when another transaction got there first, and the locking read then waits for that row.
    """
    insert = postgresql_insert if db.session.get_bind().dialect.name == "postgresql" else sqlite_insert
    db.session.execute(
        insert(AgentAccount)
        .values(address=address, kind=AGENT, balance=0, created_at=utcnow())
        .on_conflict_do_nothing(index_elements=[AgentAccount.address])
    )
    return db.session.execute(
        select(AgentAccount)
        .where(AgentAccount.address == address)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one()


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


def issue_challenge(address: str) -> AuthChallenge:
    """Store and return an EIP-4361 challenge for ``address`` (any case; normalised to EIP-55)."""
    checksummed = _checked_address(address)
    now = utcnow().replace(microsecond=0)
    parsed = urlparse(network_url())
    message = SiweMessage(
        domain=parsed.netloc,
        address=checksummed,
        statement=_STATEMENT,
        uri=f"{network_url()}/api/auth/verify",
        chain_id=chain_id(),
        nonce=secrets.token_hex(16),
        issued_at=now,
        expiration_time=now + _seconds("AGENT_CHALLENGE_SECONDS", 300),
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
    return challenge


@dataclass(frozen=True)
class IssuedSession:
    """A session just created: the bearer token is only available here."""

    token: str
    expires_at: datetime
    account: AgentAccount


def verify_challenge(message_text: str, signature: str) -> IssuedSession:
    """Check a signed challenge, spend its nonce, bind the DID on first use and open a session.

    Raises ``AuthenticationFailed`` for a malformed, foreign, expired, reused or wrongly signed
    message and ``AccountDeactivated`` for the key of a deregistered DID; the nonce is spent only
    by a verified signature.
    """
    try:
        message = parse_message(message_text)
        message.check(domain=urlparse(network_url()).netloc, chain_id=chain_id(), now=utcnow(), uri=None)
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
    account = _lock_or_create_account(signer)
    if account.deactivated_at is not None:
        # The signature proved the key, so naming its own DID reveals nothing to anyone else.
        raise AccountDeactivated(
            "The DID of this key was deregistered; the key can no longer sign in.", did=account.did
        )
    account = _bind_did(account, now)
    token = random_token(32)
    expires_at = now + _seconds("AGENT_SESSION_SECONDS", 3600)
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


def account_view(account: AgentAccount) -> dict[str, Any]:
    """The account as ``GET /api/account`` shows it."""
    return {
        "did": account.did,
        "address": account.address,
        "kind": account.kind,
        "balance": account.balance,
        "created_at": isoformat(account.created_at),
        "deactivated": account.deactivated_at is not None,
    }


# -- credits and the claim page ----------------------------------------------------------------


def claim_grant() -> int:
    """The credits a claimed key receives; ``ClaimUnavailable`` (404) outside a testnet."""
    if not is_testnet():
        raise ClaimUnavailable("The claim page exists only on a testnet.")
    return int(setting("AGENT_CLAIM_CREDITS", 1000))


def claim_form_lifetime() -> timedelta:
    """How long a claim form's token may be used (``AGENT_CLAIM_FORM_SECONDS``, default an hour)."""
    return _seconds("AGENT_CLAIM_FORM_SECONDS", 3600)


def spend_claim_token(token: str, issued_at: datetime) -> bool:
    """Use a claim form token once: False if it was used before or is older than its lifetime.

    The token lives in the browser's signed session cookie, which a replay can send again;
    the hash of each spent token is kept until the token would have expired anyway.
    """
    now = utcnow()
    if not token or not now - claim_form_lifetime() <= issued_at <= now:
        return False
    insert = postgresql_insert if db.session.get_bind().dialect.name == "postgresql" else sqlite_insert
    spent = db.session.execute(
        insert(SpentClaimToken.__table__)
        .values(token_hash=hash_secret(token), spent_at=now)
        .on_conflict_do_nothing(index_elements=[SpentClaimToken.token_hash])
        .returning(SpentClaimToken.token_hash)
    )
    return spent.first() is not None


def claim_key(kind: str = AGENT) -> tuple[str, AgentAccount]:
    """Issue a fresh key with the testnet grant of credits; return (private key hex, account).

    The key is returned once and never stored. Raises ``ClaimUnavailable`` (404) outside a
    testnet and ``ValidationFailed`` for an unknown kind.
    """
    grant = claim_grant()
    if kind not in (AGENT, ORGANISATION):
        raise ValidationFailed(errors={"kind": ["Must be agent or organisation."]})
    private_key = ethereum.generate_private_key()
    account = AgentAccount(
        address=ethereum.address_from_private_key(private_key), kind=kind, balance=0, created_at=utcnow()
    )
    db.session.add(account)
    db.session.flush()
    _add_entry(account, grant, "testnet-claim")
    return private_key, account


def grant_credits(address: str, amount: int, reason: str = "operator-grant") -> AgentAccount:
    """Credit an account (created for the address if new); for operators. Raises ``ValidationFailed``."""
    if amount <= 0:
        raise ValidationFailed(errors={"amount": ["Must be a positive number of credits."]})
    account = _lock_or_create_account(_checked_address(address))
    _add_entry(account, amount, reason)
    return account


def set_account_kind(address: str, kind: str) -> AgentAccount:
    """Make an account an agent or an organisation (created for the address if new); for operators."""
    if kind not in (AGENT, ORGANISATION):
        raise ValidationFailed(errors={"kind": ["Must be agent or organisation."]})
    account = _lock_or_create_account(_checked_address(address))
    account.kind = kind
    db.session.flush()
    return account


def _checked_address(address: str) -> str:
    try:
        return ethereum.parse_address(address)
    except ethereum.InvalidAddress as exc:
        raise ValidationFailed(errors={"address": [str(exc)]}) from exc


def _add_entry(
    account: AgentAccount, amount: int, reason: str, *, subject_did: str | None = None, job_id: str | None = None
) -> CreditEntry:
    account.balance += amount
    entry = CreditEntry(
        account_id=account.id,
        amount=amount,
        reason=reason,
        subject_did=subject_did,
        job_id=job_id,
        balance_after=account.balance,
        created_at=utcnow(),
    )
    db.session.add(entry)
    db.session.flush()
    return entry


def held_credits(account_id: int) -> int:
    """The credits held for the account's accepted jobs that have not finished yet."""
    return db.session.scalar(
        select(func.coalesce(func.sum(CreditHold.amount), 0))
        .join(Job, Job.id == CreditHold.job_id)
        .where(CreditHold.account_id == account_id, Job.state.in_((QUEUED, RUNNING)))
    )


def _start_paid(kind: str, operation: str, caller: AgentAccount, target: AgentAccount, **payload: Any) -> Job:
    """Start a job that ``caller`` pays for, holding its price; ``InsufficientCredits`` (402) otherwise.

    The caller's row stays locked until the request commits, so concurrent requests of one
    account reserve one after the other and never promise the same credits twice.
    """
    price = prices()[operation]
    payer = _lock_account(caller.id)
    available = payer.balance - held_credits(payer.id)
    if available < price:
        raise InsufficientCredits(price, available)
    job = _start(kind, caller, target, **payload)
    if price:
        db.session.add(CreditHold(job_id=job.id, account_id=payer.id, amount=price, created_at=utcnow()))
        db.session.flush()
    return job


def _charge(payer: AgentAccount, operation: str, subject_did: str, job_id: str) -> int:
    """Turn the job's hold into a debit of ``payer`` (already locked); raises ``InsufficientCredits``.

    The hold's amount is the price the request was accepted at; jobs accepted before holds
    existed pay the current price if the balance allows.
    """
    hold = db.session.get(CreditHold, job_id)
    price = hold.amount if hold is not None else prices()[operation]
    if payer.balance < price:
        raise InsufficientCredits(price, payer.balance)
    if hold is not None:
        db.session.delete(hold)
    _add_entry(payer, -price, operation, subject_did=subject_did, job_id=job_id)
    return price


def ledger_view(account: AgentAccount, limit: int = 100) -> dict[str, Any]:
    """The balance and the newest ledger entries of an account."""
    entries = db.session.execute(
        select(CreditEntry).where(CreditEntry.account_id == account.id).order_by(CreditEntry.id.desc()).limit(limit)
    ).scalars()
    return {
        "did": account.did,
        "balance": account.balance,
        "entries": [
            {
                "amount": entry.amount,
                "reason": entry.reason,
                "subject_did": entry.subject_did,
                "job_id": entry.job_id,
                "balance_after": entry.balance_after,
                "created_at": isoformat(entry.created_at),
            }
            for entry in entries
        ],
    }


# -- authorisation for a DID -------------------------------------------------------------------


def _lock_account(account_id: int) -> AgentAccount:
    return db.session.execute(
        select(AgentAccount)
        .where(AgentAccount.id == account_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one()


def _require_target(did: str) -> AgentAccount:
    target = get_account_by_did(did) if is_network_did(did) else None
    if target is None:
        raise UnknownDid(f"No agent has the DID {did}.")
    if target.deactivated_at is not None:
        raise DidDeactivated(f"The DID {did} was deregistered.")
    return target


def get_record(did: str) -> RegistryRecord | None:
    """The registry record of ``did``, or None."""
    return db.session.get(RegistryRecord, did)


def authorize_for_did(caller: AgentAccount, did: str) -> AgentAccount:
    """Return the target account if ``caller`` is that agent or its consented owner organisation.

    Raises ``UnknownDid`` (404), ``DidDeactivated`` (410) or ``NotAllowedForDid`` (403).
    """
    target = _require_target(did)
    if target.id == caller.id:
        return target
    record = get_record(did)
    if caller.kind == ORGANISATION and record is not None and record.owner_did == caller.did:
        return target
    raise NotAllowedForDid("You may act only for your own DID or for agents you own with their consent.")


def _ensure_record(target: AgentAccount) -> RegistryRecord:
    record = get_record(target.did)
    if record is None:
        now = utcnow()
        record = RegistryRecord(did=target.did, address=target.address, created_at=now, updated_at=now)
        db.session.add(record)
        db.session.flush()
    return record


def _job_accounts(job: Job) -> tuple[AgentAccount, AgentAccount]:
    """Lock the job's target then its payer (a fixed order, so concurrent jobs cannot deadlock).

    The permission checked when the job was accepted is checked again: an owner revoked or
    deregistered while the job waited may no longer act for the agent.
    """
    target = _lock_account(int(job.payload["target_id"]))
    payer = target if job.payload["payer_id"] == target.id else _lock_account(int(job.payload["payer_id"]))
    if target.deactivated_at is not None:
        raise DidDeactivated(f"The DID {target.did} was deregistered.")
    if payer.deactivated_at is not None:
        raise DidDeactivated(f"The DID {payer.did} was deregistered.")
    if payer.id != target.id:
        record = get_record(target.did)
        if payer.kind != ORGANISATION or record is None or record.owner_did != payer.did:
            raise NotAllowedForDid(f"{payer.did} no longer owns {target.did}.")
    return target, payer


def _start(kind: str, caller: AgentAccount, target: AgentAccount, **payload: Any) -> Job:
    return enqueue_job(
        kind, {"target_id": target.id, "payer_id": caller.id, "did": target.did, **payload}, agent_did=caller.did
    )


# -- cards -------------------------------------------------------------------------------------


def etag_of(body: bytes) -> str:
    """The strong ETag of a card body."""
    return '"' + hashlib.sha256(body).hexdigest() + '"'


def public_card_url(did: str) -> str:
    """Where the public copy of a card is served."""
    return f"{network_url()}/api/agent-card/{did}"


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def validate_card(body: bytes) -> None:
    """Refuse a card over 16384 bytes (``CardTooLarge``), or that is not one JSON object in the
    ERC-8004 registration-file shape (``InvalidCard``, its ``errors`` naming every bad field)."""
    if len(body) > MAX_CARD_BYTES:
        raise CardTooLarge(f"The card is {len(body)} bytes; at most {MAX_CARD_BYTES} are accepted.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidCard("The card is not valid UTF-8.", errors={"card": ["Not valid UTF-8."]}) from exc
    try:
        card = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidCard("The card is not JSON.", errors={"card": [f"Not JSON: {exc}"]}) from exc
    if not isinstance(card, dict):
        raise InvalidCard("The card must be one JSON object.", errors={"card": ["Not a JSON object."]})
    errors = registration_file_errors(card)
    if errors:
        raise InvalidCard(
            "The card is not an ERC-8004 registration file; see the fields named: " + ", ".join(sorted(errors)) + ".",
            errors=errors,
        )


def request_host_card(caller: AgentAccount, did: str, body: bytes) -> Job:
    """Check a host-card request and start its job (card private + public copy + charge)."""
    validate_card(body)
    target = authorize_for_did(caller, did)
    return _start_paid(
        "agents.host_card", "host-card", caller, target, body=base64.b64encode(body).decode("ascii"), etag=etag_of(body)
    )


def host_card_from_job(job: Job) -> dict[str, Any]:
    """Store the private card, publish the identical public copy and charge the payer, together."""
    target, payer = _job_accounts(job)
    body = base64.b64decode(job.payload["body"])
    etag = etag_of(body)
    now = utcnow()
    charged = _charge(payer, "host-card", target.did, job.id)
    _ensure_record(target).updated_at = now
    private = db.session.get(PrivateCard, target.did) or PrivateCard(did=target.did)
    private.body = body
    private.etag = etag
    private.hosted_by_did = payer.did
    private.job_id = job.id
    private.updated_at = now
    public = db.session.get(PublicCard, target.did) or PublicCard(did=target.did)
    public.body = body
    public.etag = etag
    public.job_id = job.id
    public.published_at = now
    db.session.add_all([private, public])
    db.session.flush()
    return {
        "did": target.did,
        "size": len(body),
        "etag": etag,
        "public_url": public_card_url(target.did),
        "charged": charged,
        "balance": payer.balance,
    }


def card_view(caller: AgentAccount, did: str) -> dict[str, Any]:
    """The private view of a card for the agent or its owner: ``published`` tells the copies apart."""
    target = authorize_for_did(caller, did)
    private = db.session.get(PrivateCard, target.did)
    if private is None:
        raise CardNotFound(f"No card is hosted for {did}.")
    public = db.session.get(PublicCard, target.did)
    return {
        "did": target.did,
        "published": public is not None,
        "card": json.loads(private.body.decode("utf-8")),
        "size": len(private.body),
        "etag": private.etag,
        "public_url": public_card_url(target.did) if public is not None else None,
        "updated_at": isoformat(private.updated_at),
    }


def request_card_unpublish(caller: AgentAccount, did: str) -> Job:
    """Check and start the job that removes the public copy (the private card stays)."""
    target = authorize_for_did(caller, did)
    if db.session.get(PublicCard, target.did) is None:
        raise CardNotFound(f"No public card is published for {did}.")
    return _start_paid("agents.card_unpublish", "card-unpublish", caller, target)


def card_unpublish_from_job(job: Job) -> dict[str, Any]:
    """Remove the public copy and charge the payer, together."""
    target, payer = _job_accounts(job)
    public = db.session.get(PublicCard, target.did)
    if public is None:
        raise CardNotFound(f"No public card is published for {target.did}.")
    charged = _charge(payer, "card-unpublish", target.did, job.id)
    db.session.delete(public)
    db.session.flush()
    return {"did": target.did, "published": False, "charged": charged, "balance": payer.balance}


def get_public_card(did: str) -> PublicCard:
    """The published card of ``did``; ``CardNotFound`` when none is published."""
    card = db.session.get(PublicCard, did) if is_network_did(did) else None
    if card is None:
        raise CardNotFound(f"No card is published for {did}.")
    return card


def validate_card_uri(uri: Any) -> str:
    """Return ``uri`` if it is an absolute https or http URL of at most 2048 bytes.

    Anything else (``javascript:``, ``data:``, relative or host-less URIs) raises
    ``ValidationFailed``: the URI becomes the DID document's ``serviceEndpoint``, which
    resolvers and browsers follow.
    """
    if not isinstance(uri, str) or not _ABSOLUTE_URI.fullmatch(uri):
        raise ValidationFailed(errors={"uri": ["Must be an absolute URI."]})
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise ValidationFailed(errors={"uri": [f"Not a valid URI: {exc}"]}) from exc
    if parts.scheme.lower() not in CARD_URI_SCHEMES or not parts.hostname:
        raise ValidationFailed(errors={"uri": ["Must be an absolute https or http URL with a host."]})
    if len(uri.encode("utf-8")) > MAX_CARD_URI_BYTES:
        raise ValidationFailed(errors={"uri": [f"Must be at most {MAX_CARD_URI_BYTES} bytes."]})
    return uri


def request_set_card(caller: AgentAccount, did: str, uri: str) -> Job:
    """Check and start the job that registers a card URI in the registry record."""
    validate_card_uri(uri)
    target = authorize_for_did(caller, did)
    return _start_paid("agents.set_card", "set-card", caller, target, uri=uri)


def set_card_from_job(job: Job) -> dict[str, Any]:
    """Write the card URI into the registry record and charge the payer, together."""
    target, payer = _job_accounts(job)
    charged = _charge(payer, "set-card", target.did, job.id)
    record = _ensure_record(target)
    record.card_uri = job.payload["uri"]
    record.updated_at = utcnow()
    db.session.flush()
    return {"did": target.did, "card_uri": record.card_uri, "charged": charged, "balance": payer.balance}


# -- registry and deregistration ---------------------------------------------------------------


def registry_view(did: str, *, full: bool = False) -> dict[str, Any]:
    """A registry record (``full`` adds the cards, the account and the contract)."""
    target = _require_target(did)
    record = get_record(did)
    if record is None:
        raise NotFound(f"{did} has no registry record yet.")
    view: dict[str, Any] = {
        "did": record.did,
        "owner": record.owner_did,
        "card_uri": record.card_uri,
        "updated_at": isoformat(record.updated_at),
    }
    if full:
        private = db.session.get(PrivateCard, did)
        public = db.session.get(PublicCard, did)
        view.update(
            {
                "address": record.address,
                "blockchain_account_id": f"eip155:{chain_id()}:{record.address}",
                "kind": target.kind,
                "created_at": isoformat(record.created_at),
                "did_bound_at": isoformat(target.did_bound_at),
                "card": {
                    "hosted": private is not None,
                    "published": public is not None,
                    "size": len(private.body) if private is not None else None,
                    "etag": private.etag if private is not None else None,
                    "hosted_by": private.hosted_by_did if private is not None else None,
                    "public_url": public_card_url(did) if public is not None else None,
                },
                "contract": {"name": REGISTRY_CONTRACT, "version": registry_contract_version()},
            }
        )
    return view


def request_deregister(caller: AgentAccount, did: str) -> Job:
    """Check and start self-service deregistration; ``OwnerNamedRecord`` (409) for owned agents."""
    target = _require_target(did)
    if target.id != caller.id:
        raise NotAllowedForDid("Only the agent itself can deregister its DID.")
    record = get_record(did)
    if record is not None and record.owner_did:
        raise OwnerNamedRecord(record.owner_did)
    return _start_paid("agents.deregister", "deregister", caller, target)


def deregister_from_job(job: Job) -> dict[str, Any]:
    """Remove the registry record and both cards, deactivate the DID and revoke its sessions.

    An organisation's deregistration also releases the agents it owns: their records name no
    owner any more and its consents end. All in one transaction.
    """
    target, payer = _job_accounts(job)
    record = get_record(target.did)
    if record is not None and record.owner_did:
        raise OwnerNamedRecord(record.owner_did)
    charged = _charge(payer, "deregister", target.did, job.id)
    now = utcnow()
    for model in (PublicCard, PrivateCard, RegistryRecord):
        db.session.execute(delete(model).where(model.did == target.did))
    # Sessions now only show the account its own jobs (the outcome of this one), and not for long.
    revoked_by = now + _seconds("AGENT_CHALLENGE_SECONDS", 300)
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
    return {"did": target.did, "deactivated": True, "charged": charged, "released_agents": released}


# -- organisation consent ----------------------------------------------------------------------


def consent_url(consent_id: str) -> str:
    """The consent link an organisation hands to the agent."""
    return f"{network_url()}/consent/{consent_id}"


def consent_view(consent: Consent) -> dict[str, Any]:
    """A consent as the API shows it."""
    return {
        "id": consent.id,
        "owner": consent.owner_did,
        "agent": consent.agent_did,
        "state": consent.state,
        "message": consent.message,
        "consent_url": consent_url(consent.id),
        "created_at": isoformat(consent.created_at),
        "expires_at": isoformat(consent.expires_at),
        "approved_at": isoformat(consent.approved_at),
    }


def request_consent(caller: AgentAccount, owner: str, agent: str) -> Consent:
    """As organisation ``owner`` (the caller), ask ``agent`` to accept it as owner."""
    if caller.kind != ORGANISATION:
        raise NotAnOrganisation("Only an organisation account can request ownership of an agent.")
    if owner != caller.did:
        raise NotAllowedForDid("The owner must be the authenticated organisation.")
    target = _require_target(agent)
    if target.id == caller.id:
        raise ValidationFailed(errors={"agent": ["An organisation cannot own itself."]})
    record = get_record(agent)
    if record is not None and record.owner_did:
        raise AlreadyOwned(f"{agent} is already owned by {record.owner_did}.")
    now = utcnow().replace(microsecond=0)
    consent_id = secrets.token_hex(16)
    expires_at = now + _seconds("AGENT_CONSENT_SECONDS", 7 * 24 * 3600)
    message = format_consent_message(
        ConsentTerms(
            network_host=urlparse(network_url()).netloc,
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


def request_consent_approval(caller: AgentAccount, consent_id: str, signature: str) -> Job:
    """As the agent, approve a consent with a personal_sign signature of its message; starts a job."""
    consent = get_consent_for(caller, consent_id)
    if caller.did != consent.agent_did:
        raise NotAllowedForDid("Only the agent named in the consent can approve it.")
    if consent.state != PENDING or as_utc(consent.expires_at) <= utcnow():
        raise ConsentNotPending("The consent is no longer pending.")
    try:
        signer = ethereum.recover_personal_signer(consent.message, signature)
    except ethereum.InvalidSignature as exc:
        raise ValidationFailed(errors={"signature": [str(exc)]}) from exc
    if signer != caller.address:
        raise ValidationFailed(errors={"signature": ["Not signed by the agent's key."]})
    return _start("agents.approve_consent", caller, caller, consent_id=consent.id, signature=signature)


def approve_consent_from_job(job: Job) -> dict[str, Any]:
    """Name the owner in the agent's registry record and mark the consent approved, together."""
    target, _payer = _job_accounts(job)
    consent = db.session.get(Consent, job.payload["consent_id"])
    if consent is None or consent.state != PENDING:
        raise ConsentNotPending("The consent is no longer pending.")
    owner = get_account_by_did(consent.owner_did)
    if owner is None or owner.deactivated_at is not None:
        raise ConsentNotPending(f"The organisation {consent.owner_did} was deregistered.")
    record = _ensure_record(target)
    if record.owner_did and record.owner_did != consent.owner_did:
        raise AlreadyOwned(f"{target.did} is already owned by {record.owner_did}.")
    now = utcnow()
    record.owner_did = consent.owner_did
    record.updated_at = now
    consent.state, consent.signature, consent.approved_at = APPROVED, job.payload["signature"], now
    db.session.flush()
    return {"agent": target.did, "owner": consent.owner_did, "consent": consent.id}


# -- owner revocation --------------------------------------------------------------------------


def _revocation_window() -> timedelta:
    return _seconds("AGENT_CHALLENGE_SECONDS", 300)


def request_owner_revocation(caller: AgentAccount, did: str, owner: str, issued_at: str, signature: str) -> Job:
    """As the agent, drop the owner its record names, by a signed revocation; starts a job.

    The agent's key signs ``format_revocation_message`` for this network, agent, owner and
    ``issued_at``; that time must be within ``AGENT_CHALLENGE_SECONDS`` of now and after the
    owner's consent was approved, so a revocation cannot be replayed against a later consent.
    Raises ``NotAllowedForDid`` (403) for anyone but the agent, ``OwnerNotNamed`` (409) when the
    record names another owner or none, ``ValidationFailed`` (422) for the time or signature.
    """
    target = _require_target(did)
    if target.id != caller.id:
        raise NotAllowedForDid("Only the agent itself can revoke its owner.")
    record = get_record(did)
    if record is None or record.owner_did != owner:
        raise OwnerNotNamed(f"The registry record of {did} does not name {owner} as owner.")
    try:
        moment = parse_date_time(issued_at)
    except InvalidSiweMessage as exc:
        raise ValidationFailed(errors={"issued_at": [str(exc)]}) from exc
    now = utcnow()
    if abs(moment - now) > _revocation_window():
        raise ValidationFailed(errors={"issued_at": ["Must be within a few minutes of now; sign a fresh revocation."]})
    approved = db.session.scalar(
        select(func.max(Consent.approved_at)).where(
            Consent.agent_did == did, Consent.owner_did == owner, Consent.state == APPROVED
        )
    )
    if approved is not None and moment <= as_utc(approved):
        raise ValidationFailed(errors={"issued_at": ["Must be after the owner's consent was approved."]})
    message = format_revocation_message(
        OwnerRevocation(
            network_host=urlparse(network_url()).netloc, agent_did=did, owner_did=owner, issued_at=issued_at
        )
    )
    try:
        signer = ethereum.recover_personal_signer(message, signature)
    except ethereum.InvalidSignature as exc:
        raise ValidationFailed(errors={"signature": [str(exc)]}) from exc
    if signer != caller.address:
        raise ValidationFailed(errors={"signature": ["Not the agent key's signature of the revocation message."]})
    return _start("agents.revoke_owner", caller, target, owner=owner, issued_at=issued_at, signature=signature)


def revoke_owner_from_job(job: Job) -> dict[str, Any]:
    """Clear the record's owner and mark its consent revoked, together; no-op refusal if it changed."""
    target, _payer = _job_accounts(job)
    owner = job.payload["owner"]
    record = get_record(target.did)
    if record is None or record.owner_did != owner:
        raise OwnerNotNamed(f"The registry record of {target.did} does not name {owner} as owner.")
    record.owner_did = None
    record.updated_at = utcnow()
    db.session.execute(
        update(Consent)
        .where(Consent.agent_did == target.did, Consent.owner_did == owner, Consent.state == APPROVED)
        .values(state=REVOKED)
        .execution_options(synchronize_session=False)
    )
    db.session.flush()
    return {"agent": target.did, "revoked_owner": owner}


# -- housekeeping ------------------------------------------------------------------------------


def purge_expired() -> int:
    """Delete expired sign-in challenges, sessions and spent claim tokens and the holds of finished
    jobs; returns how many rows went. Flushes only."""
    now = utcnow()
    removed = db.session.execute(delete(AuthChallenge).where(AuthChallenge.expires_at < now)).rowcount
    removed += db.session.execute(delete(AgentSession).where(AgentSession.expires_at < now)).rowcount
    removed += db.session.execute(
        delete(SpentClaimToken).where(SpentClaimToken.spent_at < now - claim_form_lifetime())
    ).rowcount
    finished = select(Job.id).where(Job.state.in_((SUCCEEDED, FAILED)))
    removed += db.session.execute(delete(CreditHold).where(CreditHold.job_id.in_(finished))).rowcount
    return removed


# -- DID resolution ----------------------------------------------------------------------------


def did_document(account: AgentAccount, record: RegistryRecord | None) -> dict[str, Any]:
    """The DID document of an agent account (with its AgentService once a card URI is set)."""
    did = account.did
    method_id = f"{did}#owner"
    document: dict[str, Any] = {
        "@context": list(DID_CONTEXTS),
        "id": did,
        "verificationMethod": [
            {
                "id": method_id,
                "type": "EcdsaSecp256k1RecoveryMethod2020",
                "controller": did,
                "blockchainAccountId": f"eip155:{chain_id()}:{account.address}",
            }
        ],
        "authentication": [method_id],
        "assertionMethod": [method_id],
    }
    if record is not None and record.owner_did:
        document["controller"] = [did, record.owner_did]
    # A registered URI naming this network's own public copy is only advertised while that copy is served.
    if record is not None and record.card_uri and _card_uri_is_served(did, record.card_uri):
        document["service"] = [{"id": f"{did}#agent", "type": "AgentService", "serviceEndpoint": record.card_uri}]
    return document


def _card_uri_is_served(did: str, card_uri: str) -> bool:
    if card_uri.rstrip("/") != public_card_url(did):
        return True
    return db.session.get(PublicCard, did) is not None


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving a DID: HTTP status and the DID resolution result."""

    status: int
    result: dict[str, Any]

    @property
    def document(self) -> dict[str, Any] | None:
        return self.result.get("didDocument")


def _resolution_error(status: int, error: str, title: str, detail: str) -> Resolution:
    return Resolution(
        status,
        {
            "@context": DID_RESOLUTION_CONTEXT,
            "didDocument": None,
            "didResolutionMetadata": {
                "error": {"type": f"https://www.w3.org/ns/did#{error}", "title": title, "detail": detail}
            },
            "didDocumentMetadata": {},
        },
    )


def resolve_did(did: str) -> Resolution:
    """Resolve a DID of this network: 200, 400 INVALID_DID, 404 NOT_FOUND or 410 deactivated."""
    if not _DID_SYNTAX.match(did) or not is_network_did(did):
        return _resolution_error(
            400, "INVALID_DID", "Invalid DID", f"Not a DID of this network (did:{did_method()}:<40 hex>)."
        )
    row = db.session.execute(
        select(AgentAccount, RegistryRecord)
        .outerjoin(RegistryRecord, RegistryRecord.did == AgentAccount.did)
        .where(AgentAccount.did == did)
    ).first()
    if row is None:
        return _user_resolution(did) or _resolution_error(404, "NOT_FOUND", "DID not found", f"{did} is unknown.")
    account, record = row
    metadata: dict[str, Any] = {"created": isoformat(account.did_bound_at)}
    if account.deactivated_at is not None:
        metadata.update({"deactivated": True, "updated": isoformat(account.deactivated_at)})
        document = {"@context": list(DID_CONTEXTS), "id": did}
        status = 410
    else:
        if record is not None:
            metadata["updated"] = isoformat(record.updated_at)
        document = did_document(account, record)
        status = 200
    return Resolution(
        status,
        {
            "@context": DID_RESOLUTION_CONTEXT,
            "didDocument": document,
            "didResolutionMetadata": {"contentType": "application/did+json", "retrieved": isoformat(utcnow())},
            "didDocumentMetadata": metadata,
        },
    )


def _user_resolution(did: str) -> Resolution | None:
    """Users of the identity platform hold DIDs in this network's method too."""
    document = user_did_document(did)
    if document is None:
        return None
    return Resolution(
        200,
        {
            "@context": DID_RESOLUTION_CONTEXT,
            "didDocument": document,
            "didResolutionMetadata": {"contentType": "application/did+json", "retrieved": isoformat(utcnow())},
            "didDocumentMetadata": {},
        },
    )


def resolve_network_did(did: str) -> dict[str, Any] | None:
    """The DID document of an active DID of this network (agents and users), or None.

    For the credentials verifier and other features: deactivated, unknown and malformed DIDs
    all give None.
    """
    resolution = resolve_did(did)
    return resolution.document if resolution.status == 200 else None
