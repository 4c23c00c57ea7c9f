"""HTTP surface of the agent network: ``/api/...`` JSON, public card and DID reads, HTML pages."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from flask import Response, render_template, request, session
from flask_smorest import Blueprint
from sqlalchemy import bindparam, select
from werkzeug.http import parse_etags

from app.agents import accounts, cards, consents, credits, registry
from app.agents.auth import agent_session_required, current_account
from app.agents.models import PublicCard
from app.agents.schemas import (
    AccountEnvelope,
    ApproveIn,
    CardUriIn,
    CardViewEnvelope,
    ChallengeEnvelope,
    ChallengeIn,
    ConsentEnvelope,
    ConsentIn,
    ConsentOut,
    ContractArgs,
    ContractEnvelope,
    DeregisterIn,
    LedgerEnvelope,
    PricingEnvelope,
    RegistryArgs,
    RegistryEnvelope,
    RevokeOwnerIn,
    SessionEnvelope,
    TypedDataEnvelope,
    TypedDataIn,
    VerifyIn,
)
from app.agents.settings import AgentSettings
from app.cache import Cache
from app.db import read_only
from app.dialect import DriverStatement
from app.dids import resolution as did_resolution
from app.dids.method import is_network_did
from app.dids.syntax import NETWORK_DID
from app.extensions import limiter
from app.http import BARE_LOCATION_HEADER, accepted_job, accepts, job_id_or_404, problem_doc
from app.idempotency.service import idempotent
from app.jobs.models import Job
from app.jobs.schemas import JobEnvelope
from app.jobs.service import require_job_for_agent
from app.security import random_token, texts_equal
from app.settings import current
from app.web.hot import HotAnswer, HotRequest, hot
from app.web.pages import page_security_headers

blp = Blueprint(
    "agents",
    __name__,
    description="Agent network: identities, credits, cards, registry",
    template_folder="templates",
)

DID_RESOLUTION = "application/did-resolution"
DID_JSON = "application/did+json"
_PAGE_HEADERS = page_security_headers(
    "default-src 'none'; script-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)


def _accepted(job: Job) -> tuple[dict, int, dict]:
    return accepted_job(job, "agents.get_agent_job")


def _claim_rate_limit() -> str:
    return current(AgentSettings).claim_rate_limit


def _challenge_rate_limit() -> str:
    return current(AgentSettings).challenge_rate_limit


def _page(html: str, status: int = 200, *, no_store: bool = False) -> Response:
    response = Response(html, status=status, mimetype="text/html")
    response.headers.update(_PAGE_HEADERS)
    if no_store:
        response.headers["Cache-Control"] = "no-store"
    return response


# -- authentication ----------------------------------------------------------------------------


@blp.route("/api/auth/challenge", methods=["POST"])
@limiter.limit(_challenge_rate_limit)
@blp.arguments(ChallengeIn)
@blp.response(200, ChallengeEnvelope)
@problem_doc(400, 413, 415, 422, 429)
def auth_challenge(args: dict):
    """Get an EIP-4361 message to sign with the agent key."""
    return {"data": accounts.issue_challenge(args["address"])}


@blp.route("/api/auth/verify", methods=["POST"])
@limiter.limit(_challenge_rate_limit)
@blp.arguments(VerifyIn)
@blp.response(200, SessionEnvelope)
@problem_doc(400, 401, 413, 415, 422, 429)
def auth_verify(args: dict):
    """Exchange the signed message for a session token; the key's DID is bound on first use.

    Limited per network address like the challenge (each attempt recovers a signature)."""
    issued = accounts.verify_challenge(args["message"], args["signature"])
    return {"data": issued}, 200, {"Cache-Control": "no-store"}


@blp.route("/api/account", methods=["GET"])
@agent_session_required
@blp.response(200, AccountEnvelope)
def get_account():
    """The authenticated account: DID, address, kind and credit balance."""
    return {"data": current_account()}


# -- credits -----------------------------------------------------------------------------------


@blp.route("/api/pricing", methods=["GET"])
@blp.response(200, PricingEnvelope)
def get_pricing():
    """The price list of registry writes, in credits."""
    return {"data": {"unit": "credits", "prices": credits.prices()}}


@blp.route("/api/credits", methods=["GET"])
@agent_session_required
@blp.response(200, LedgerEnvelope)
def get_credits():
    """The balance and the newest ledger entries of the authenticated account."""
    return {"data": credits.get_ledger(current_account())}


@blp.route("/claim", methods=["GET"])
@blp.doc(responses={"200": {"description": "HTML claim form", "content": {"text/html": {}}}})
@problem_doc(404)
def claim_page():
    """Testnet only: a form that issues a fresh agent key with test credits."""
    granted = credits.claim_grant()
    # One token per browser session, renewed when half its life is gone (the POST spends it).
    now = int(datetime.now(UTC).timestamp())
    fresh_for = current(AgentSettings).claim_form_lifetime.total_seconds() / 2
    if not session.get("claim_csrf") or now - int(session.get("claim_csrf_at", 0)) > fresh_for:
        session["claim_csrf"], session["claim_csrf_at"] = random_token(24), now
    token = session["claim_csrf"]
    return _page(render_template("agents/claim.html", csrf_token=token, credits=granted), no_store=True)


@blp.route("/claim", methods=["POST"])
@limiter.limit(_claim_rate_limit, methods=["POST"])
@accepts("application/x-www-form-urlencoded", "multipart/form-data")
@blp.doc(
    requestBody={
        "required": True,
        "content": {
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "csrf_token": {"type": "string", "description": "The token of the claim form."},
                        "kind": {"type": "string", "enum": ["agent", "organisation"], "default": "agent"},
                    },
                    "required": ["csrf_token"],
                }
            }
        },
    },
    responses={
        "200": {"description": "HTML page showing the new key once", "content": {"text/html": {}}},
        "400": {
            "description": "HTML page: the form expired (its CSRF token is missing or was used); load it again",
            "content": {"text/html": {}},
        },
    },
)
@problem_doc(404, 413, 415, 422, 429)
def claim_submit():
    """Testnet only: issue a fresh key with test credits and show it once (rate limited)."""
    expected = session.pop("claim_csrf", None)
    issued_at = datetime.fromtimestamp(int(session.pop("claim_csrf_at", 0)), UTC)
    supplied = request.form.get("csrf_token", "")
    if not expected or not texts_equal(supplied, expected) or not credits.spend_claim_token(expected, issued_at):
        return _page(render_template("agents/claim_error.html"), 400, no_store=True)
    private_key, account = credits.claim_key(request.form.get("kind", "agent"))
    return _page(
        render_template(
            "agents/claimed.html",
            private_key=private_key,
            address=account.address,
            kind=account.kind,
            credits=account.balance,
            network_url=current(AgentSettings).network_url,
        ),
        no_store=True,
    )


# -- cards -------------------------------------------------------------------------------------


@blp.route("/api/agents/<string:did>/card", methods=["PUT"])
@agent_session_required
@idempotent
@blp.doc(
    requestBody={
        "required": True,
        "description": "The card: one JSON object, at most 16384 bytes as sent; stored and served byte for byte.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(402, 403, 404, 410, 413, 415, 422)
def put_card(did: str):
    """Host a card: a job stores it privately and publishes the identical public copy (charged)."""
    return _accepted(cards.request_host_card(current_account(), did, request.get_data(cache=True)))


@blp.route("/api/agents/<string:did>/card", methods=["GET"])
@agent_session_required
@blp.response(200, CardViewEnvelope)
@problem_doc(403, 404, 410)
def get_card(did: str):
    """The hosted card as its agent or owner sees it; ``published`` says whether it is public."""
    return {"data": cards.get_card_view(current_account(), did)}


@blp.route("/api/agents/<string:did>/card/public", methods=["DELETE"])
@agent_session_required
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(402, 403, 404, 410)
def delete_public_card(did: str):
    """Unpublish the card: a job removes the public copy; the private card stays."""
    return _accepted(cards.request_card_unpublish(current_account(), did))


@blp.route("/api/agents/<string:did>/registry/card-uri", methods=["PUT"])
@agent_session_required
@idempotent
@blp.arguments(CardUriIn)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 402, 403, 404, 409, 410, 413, 415, 422, 503)
def put_card_uri(args: dict, did: str):
    """set-card: a job registers the card URI; it then appears as the DID document's AgentService.

    On a chain registry the body also carries the agent's signature and its deadline (see typed-data)."""
    return _accepted(cards.request_set_card(current_account(), did, args["uri"], args["signature"], args["deadline"]))


@blp.route("/api/agents/<string:did>/registry/typed-data", methods=["POST"])
@agent_session_required
@blp.arguments(TypedDataIn)
@blp.response(200, TypedDataEnvelope)
@problem_doc(400, 403, 404, 409, 410, 413, 415, 422, 503)
def post_registry_typed_data(args: dict, did: str):
    """The EIP-712 typed data a registry write of ``did`` on a chain registry needs signed, and by whom:
    set-card, deregister, and ownership (set-owner, approve-consent, revoke-owner)."""
    return {
        "data": registry.registry_write_to_sign(
            current_account(), did, args["operation"], args["uri"], args["owner"], args["consent"]
        )
    }


@blp.route("/api/agents/<string:did>/registry", methods=["GET"])
@agent_session_required
@blp.arguments(RegistryArgs, location="query")
@blp.response(200, RegistryEnvelope)
@problem_doc(404, 410)
def get_registry(args: dict, did: str):
    """Read a registry record; ``full=true`` adds cards, account and contract details."""
    return {"data": registry.get_registry_view(did, full=args["full"])}


@blp.route("/api/agents/<string:did>", methods=["DELETE"])
@agent_session_required
@blp.arguments(DeregisterIn, required=False)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 402, 403, 404, 409, 410, 413, 415, 422, 503)
def deregister(args: dict, did: str):
    """Deregister (self only): a job removes the record and both cards; 409 if an owner is named.

    On a chain registry a DID with a record there sends the agent's signature and its deadline as a
    JSON body (see typed-data)."""
    return _accepted(registry.request_deregister(current_account(), did, args["signature"], args["deadline"]))


@blp.route("/api/agents/<string:did>/owner/revoke", methods=["POST"])
@agent_session_required
@idempotent
@blp.arguments(RevokeOwnerIn)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 403, 404, 409, 410, 413, 415, 422, 503)
def revoke_owner(args: dict, did: str):
    """As the agent, revoke the owner organisation by a signed revocation; a job clears the owner."""
    return _accepted(consents.request_owner_revocation(current_account(), did, **args))


@blp.route("/api/contracts/current", methods=["GET"])
@blp.arguments(ContractArgs, location="query")
@blp.response(200, ContractEnvelope)
@problem_doc(404, 422, 503)
def current_contract(args: dict):
    """The version of a registry contract (``name=agent-registry``); read from the chain on an EVM registry."""
    return {"data": registry.require_contract(args["name"])}


# -- consent -----------------------------------------------------------------------------------


@blp.route("/api/consents", methods=["POST"])
@agent_session_required
@idempotent
@blp.arguments(ConsentIn)
@blp.response(201, ConsentEnvelope)
@problem_doc(400, 403, 404, 409, 410, 413, 415, 422, 503)
def create_consent(args: dict):
    """As an organisation, ask an agent to accept it as owner; answers with the consent link."""
    return {"data": consents.request_consent(current_account(), **args)}


@blp.route("/api/consents/<string:consent_id>", methods=["GET"])
@agent_session_required
@blp.response(200, ConsentEnvelope)
@problem_doc(404)
def get_consent(consent_id: str):
    """A consent the caller is party to, with the message the agent signs."""
    return {"data": consents.get_consent_for(current_account(), consent_id)}


@blp.route("/api/consents/<string:consent_id>/approve", methods=["POST"])
@agent_session_required
@idempotent
@blp.arguments(ApproveIn)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 403, 404, 409, 413, 415, 422, 503)
def approve_consent(args: dict, consent_id: str):
    """As the agent, approve with a signature of the message; a job names the owner in the record."""
    return _accepted(consents.request_consent_approval(current_account(), consent_id, **args))


@blp.route("/consent/<string:consent_id>", methods=["GET"])
@blp.doc(responses={"200": {"description": "HTML consent page", "content": {"text/html": {}}}})
@problem_doc(404)
def consent_page(consent_id: str):
    """The consent link: tells the agent how to approve with its key."""
    consent = ConsentOut().dump(consents.require_consent(consent_id))
    return _page(render_template("agents/consent.html", consent=consent))


# -- jobs --------------------------------------------------------------------------------------


@blp.route("/api/jobs/<string:job_id>", methods=["GET"])
@agent_session_required(allow_deactivated=True)
@blp.response(200, JobEnvelope)
@problem_doc(404)
def get_agent_job(job_id: str):
    """A job started by the authenticated account."""
    return {"data": require_job_for_agent(job_id_or_404(job_id), current_account().did)}


# -- public reads ------------------------------------------------------------------------------


@blp.route("/api/agent-card/<string:did>", methods=["GET"])
@blp.doc(
    responses={
        "200": {"description": "The card, byte for byte as hosted", "content": {"application/json": {}}},
        "304": {"description": "Not modified (If-None-Match)"},
    }
)
@problem_doc(404)
@limiter.exempt  # no limit applies; skips the limiter's per-request lookup
@read_only
def public_agent_card(did: str):
    """The published card of a DID, exactly the bytes that were hosted (public)."""
    # Plain reads are answered before dispatch by `read_public_card_at_once`; this view answers the rest.
    card = cards.get_public_card(did)
    headers = card_headers(card.etag, current(AgentSettings).card_cache_seconds)
    if card.etag.strip('"') in request.if_none_match:
        return Response(status=304, headers=headers)
    return Response(card.body, status=200, mimetype="application/json", headers=headers)


def _wants_resolution_result() -> bool:
    accept = request.accept_mimetypes
    return any(mimetype == DID_RESOLUTION or "did-resolution" in mimetype for mimetype, _quality in accept)


@blp.route("/api/did/<string:did>", methods=["GET"])
@blp.doc(
    responses={
        "200": {
            "description": "The DID document, or with Accept: application/did-resolution the full result",
            "content": {DID_JSON: {}, DID_RESOLUTION: {}},
        },
        "400": {"description": "INVALID_DID", "content": {DID_RESOLUTION: {}}},
        "404": {"description": "NOT_FOUND", "content": {DID_RESOLUTION: {}}},
        "410": {"description": "Deactivated (didDocumentMetadata.deactivated)", "content": {DID_RESOLUTION: {}}},
    }
)
@limiter.exempt  # no limit applies; skips the limiter's per-request lookup
@read_only
def resolve_did(did: str):
    """Resolve a DID of this network (public)."""
    # Plain document reads are answered before dispatch by `read_agent_did_at_once`.
    resolution = did_resolution.resolve_did(did)
    if resolution.status == 200 and not _wants_resolution_result():
        body, mimetype = resolution.result["didDocument"], DID_JSON
    else:
        body, mimetype = resolution.result, DID_RESOLUTION
    payload, etag = encode_did_body(body)
    headers = did_headers(etag, current(AgentSettings).card_cache_seconds)
    if resolution.status == 200 and etag in request.if_none_match:
        return Response(status=304, headers=headers)
    return Response(payload, status=resolution.status, mimetype=mimetype, headers=headers)


def card_headers(etag: str, cache_seconds: int) -> dict[str, str]:
    """Headers of a public card answer (200 or 304)."""
    return {
        "ETag": etag,
        "Cache-Control": f"public, max-age={cache_seconds}",
        # The bytes are the agent's: never sniffed as another type, never run as a page.
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
    }


def encode_did_body(body: dict[str, Any]) -> tuple[bytes, str]:
    """The bytes of a DID document or resolution result and their strong validator (unquoted)."""
    payload = json.dumps(body).encode()
    return payload, hashlib.sha256(payload).hexdigest()[:32]


def did_headers(etag: str, cache_seconds: int) -> dict[str, str]:
    """Headers of a DID resolution answer; the bytes depend on Accept, hence Vary."""
    return {"Cache-Control": f"public, max-age={cache_seconds}", "ETag": f'"{etag}"', "Vary": "Accept"}


# The hot path of the network: plain public reads answered before dispatch, from prebuilt
# statements; unknown, deactivated or user DIDs, a resolution result, HEAD: the views above.
_PUBLIC_CARD = DriverStatement(select(PublicCard.body, PublicCard.etag).where(PublicCard.did == bindparam("did")))
# Agents' DID documents as served (bytes, etag), valid while `registry.agent_did_version` is unchanged.
_DID_DOCUMENTS: Cache[tuple[bytes, str]] = Cache("agent_did_documents", maxsize=10_000)


@hot.route("GET", rf"/api/agent-card/(?P<did>{NETWORK_DID})", view="agents.public_agent_card")
def read_public_card_at_once(request: HotRequest) -> HotAnswer | None:
    """A published card, the bytes the publish job stored, with their strong ETag (or 304)."""
    did = request.params["did"]
    if not is_network_did(did, request.app):
        return request.hand_off("a DID of another method")
    with request.unit_of_work() as connection:
        row = _PUBLIC_CARD.first(connection, {"did": did})
    if row is None:
        return request.hand_off("no published card")
    body, etag = row
    headers = card_headers(etag, current(AgentSettings, request.app).card_cache_seconds)
    if _none_match(request, etag.strip('"')):
        return HotAnswer(304, b"", headers)
    return HotAnswer(200, body, {"Content-Type": "application/json", **headers})


@hot.route("GET", rf"/api/did/(?P<did>{NETWORK_DID})", view="agents.resolve_did")
def read_agent_did_at_once(request: HotRequest) -> HotAnswer | None:
    """An active agent's DID document (or 304), rebuilt only when what it is built from changed."""
    did = request.params["did"]
    if "did-resolution" in request.header("HTTP_ACCEPT"):
        return request.hand_off("the resolution result carries its time of retrieval")
    if not is_network_did(did, request.app):
        return request.hand_off("a DID of another method")
    with request.unit_of_work() as connection:
        version = registry.agent_did_version(did, connection, request.app)
    if version is None:
        return request.hand_off("no active agent of this DID")
    answer = _DID_DOCUMENTS.get(did, version)
    if answer is None:
        with request.app.app_context():
            resolution = did_resolution.resolve_did(did)
        if resolution.status != 200:
            return request.hand_off(f"resolution answered {resolution.status}")
        answer = encode_did_body(resolution.result["didDocument"])
        _DID_DOCUMENTS.put(did, answer, version)
    body, etag = answer
    headers = did_headers(etag, current(AgentSettings, request.app).card_cache_seconds)
    if _none_match(request, etag):
        return HotAnswer(304, b"", headers)
    return HotAnswer(200, body, {"Content-Type": DID_JSON, **headers})


def _none_match(request: HotRequest, etag: str) -> bool:
    header = request.header("HTTP_IF_NONE_MATCH")
    return bool(header) and etag in parse_etags(header)
