"""Cards of agents: the hosted private card, its public copy, and the card URI in the registry.

Every card write happens in a job (``*_from_job``), so the card's private copy, its public copy
and the charge commit together. Request-time functions (``request_*``) check everything that can
be checked up front — size, shape, permission, credits — so a refused request writes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import app.json_text as json_text
from app.agents.accounts import authorize_for_did, ensure_record, job_accounts
from app.agents.credits import charge, start_paid_job
from app.agents.errors import CardNotFound, CardTooLarge, InvalidCard
from app.agents.models import AgentAccount, PrivateCard, PublicCard
from app.agents.registration_file import did_service_errors, registration_file_errors
from app.agents.settings import AgentSettings
from app.agents.signing import SET_CARD
from app.chain.settings import EVM, ChainSettings
from app.db import utcnow
from app.dids.method import is_network_did
from app.errors import ValidationFailed
from app.extensions import db
from app.jobs.models import Job
from app.settings import current

MAX_CARD_BYTES = 16384
MAX_CARD_URI_BYTES = 2048
CARD_URI_SCHEMES = ("https", "http")
# Used with fullmatch: `$` alone also matches before a trailing newline.
_ABSOLUTE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s\x00-\x1f\x7f]+$")


@dataclass(frozen=True)
class CardView:
    """The private view of a hosted card; ``public_url`` is None while it is not published."""

    did: str
    published: bool
    card: dict[str, Any]
    size: int
    etag: str
    public_url: str | None
    updated_at: datetime


@dataclass(frozen=True)
class HostedCard:
    """The outcome of a host-card job."""

    did: str
    size: int
    etag: str
    public_url: str
    charged: int
    balance: int


@dataclass(frozen=True)
class UnpublishedCard:
    """The outcome of a card-unpublish job."""

    did: str
    charged: int
    balance: int
    published: bool = False


@dataclass(frozen=True)
class RegisteredCardUri:
    """The outcome of a set-card job."""

    did: str
    card_uri: str
    charged: int
    balance: int


def etag_of(body: bytes) -> str:
    """The strong ETag of a card body."""
    return '"' + hashlib.sha256(body).hexdigest() + '"'


def public_card_url(did: str) -> str:
    """Where the public copy of a card is served."""
    return f"{current(AgentSettings).network_url}/api/agent-card/{did}"


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def validate_card(body: bytes) -> dict:
    """The card, parsed; refuse one over 16384 bytes (``CardTooLarge``), or that is not one JSON object
    in the ERC-8004 registration-file shape (``InvalidCard``, its ``errors`` naming every bad field)."""
    if len(body) > MAX_CARD_BYTES:
        raise CardTooLarge(f"The card is {len(body)} bytes; at most {MAX_CARD_BYTES} are accepted.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidCard("The card is not valid UTF-8.", errors={"card": ["Not valid UTF-8."]}) from exc
    try:
        card = json.loads(text, parse_constant=_reject_constant)
        json_text.refuse_unpaired_surrogates(card, "(card)")
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
    return card


def request_host_card(caller: AgentAccount, did: str, body: bytes) -> Job:
    """Check a host-card request and start its job (card private + public copy + charge)."""
    card = validate_card(body)
    target = authorize_for_did(caller, did)
    if errors := did_service_errors(card, target.did):
        raise InvalidCard("The card's DID service names another DID than the agent's own.", errors=errors)
    return start_paid_job(
        "agents.host_card", "host-card", caller, target, body=base64.b64encode(body).decode("ascii"), etag=etag_of(body)
    )


def with_registration(body: bytes, agent_id: int, agent_registry: str) -> bytes:
    """The card `body` with `{agentId, agentRegistry}` as its entry for `agent_registry` in `registrations`."""
    card = json.loads(body.decode("utf-8"))
    others = [entry for entry in card.get("registrations", []) if entry.get("agentRegistry") != agent_registry]
    card["registrations"] = [*others, {"agentId": agent_id, "agentRegistry": agent_registry}]
    return json.dumps(card, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def host_card_from_job(job: Job, registration: tuple[int, str] | None = None) -> HostedCard:
    """Store the private card, publish the identical public copy and charge the payer, together.

    With `registration` (`agentId`, `agentRegistry`: the agent's ERC-8004 identity on the chain),
    both copies carry it in `registrations`.
    """
    target, payer = job_accounts(job)
    body = base64.b64decode(job.payload["body"])
    if registration is not None:
        body = with_registration(body, *registration)
    etag = etag_of(body)
    now = utcnow()
    charged = charge(payer, "host-card", target.did, job.id)
    ensure_record(target).updated_at = now
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
    return HostedCard(target.did, len(body), etag, public_card_url(target.did), charged, payer.balance)


def get_card_view(caller: AgentAccount, did: str) -> CardView:
    """The private view of a card for the agent or its owner: ``published`` tells the copies apart."""
    target = authorize_for_did(caller, did)
    private = db.session.get(PrivateCard, target.did)
    if private is None:
        raise CardNotFound(f"No card is hosted for {did}.")
    public = db.session.get(PublicCard, target.did)
    return CardView(
        did=target.did,
        published=public is not None,
        card=json.loads(private.body.decode("utf-8")),
        size=len(private.body),
        etag=private.etag,
        public_url=public_card_url(target.did) if public is not None else None,
        updated_at=private.updated_at,
    )


def request_card_unpublish(caller: AgentAccount, did: str) -> Job:
    """Check and start the job that removes the public copy (the private card stays)."""
    target = authorize_for_did(caller, did)
    if db.session.get(PublicCard, target.did) is None:
        raise CardNotFound(f"No public card is published for {did}.")
    return start_paid_job("agents.card_unpublish", "card-unpublish", caller, target)


def card_unpublish_from_job(job: Job) -> UnpublishedCard:
    """Remove the public copy and charge the payer, together."""
    target, payer = job_accounts(job)
    public = db.session.get(PublicCard, target.did)
    if public is None:
        raise CardNotFound(f"No public card is published for {target.did}.")
    charged = charge(payer, "card-unpublish", target.did, job.id)
    db.session.delete(public)
    db.session.flush()
    return UnpublishedCard(target.did, charged, payer.balance)


def get_public_card(did: str) -> PublicCard:
    """The published card of ``did``; ``CardNotFound`` when none is published."""
    card = db.session.get(PublicCard, did) if is_network_did(did) else None
    if card is None:
        raise CardNotFound(f"No card is published for {did}.")
    return card


def card_uri_is_served(did: str, card_uri: str) -> bool:
    """Whether ``card_uri`` may be advertised: a URI naming this network's own public copy only
    while that copy is served."""
    if card_uri.rstrip("/") != public_card_url(did):
        return True
    return db.session.get(PublicCard, did) is not None


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


def request_set_card(
    caller: AgentAccount, did: str, uri: str, signature: str | None = None, deadline: int | None = None
) -> Job:
    """Check and start the job that registers a card URI in the registry record.

    On a chain (`AGENT_REGISTRY_BACKEND=evm`) the request also carries the signature of the write by
    the key the contract asks for (the owner's once the record names one on chain, else the agent's)
    and its deadline (see `app.agents.chain_signatures.checked_chain_write`).
    """
    validate_card_uri(uri)
    target = authorize_for_did(caller, did)
    chain_write = {}
    if current(ChainSettings).registry_backend == EVM:
        from app.agents.chain_signatures import checked_chain_write  # web3 loads only where a chain is used

        chain_write = checked_chain_write(caller, target, SET_CARD, signature, deadline, uri)
    return start_paid_job("agents.set_card", SET_CARD, caller, target, uri=uri, **chain_write)


def set_card_from_job(job: Job) -> RegisteredCardUri:
    """Write the card URI into the registry record and charge the payer, together."""
    target, payer = job_accounts(job)
    charged = charge(payer, "set-card", target.did, job.id)
    record = ensure_record(target)
    record.card_uri = job.payload["uri"]
    record.updated_at = utcnow()
    db.session.flush()
    return RegisteredCardUri(target.did, record.card_uri, charged, payer.balance)
