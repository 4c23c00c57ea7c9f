"""HTTP surface of verifiable credentials: store, read, verify, status entries and lists."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from flask import Response, current_app, g, request, url_for
from flask_smorest import Blueprint
from marshmallow import ValidationError

from app.credentials import service
from app.credentials.schemas import (
    CredentialListEnvelope,
    CredentialRecordEnvelope,
    CredentialVerifyIn,
    CredentialVerifyOut,
    PresentationVerifyIn,
    PresentationVerifyOut,
    StatusEntryEnvelope,
    StatusEntryIn,
    StatusEntryPatch,
    StoreCredentialIn,
    StoredCredentialEnvelope,
)
from app.credentials.settings import CredentialSettings
from app.db import read_only
from app.http import BARE_LOCATION_HEADER, accepted_job, parse_json_body, problem_doc
from app.idempotency.service import idempotent
from app.jobs.schemas import JobEnvelope
from app.oidc.auth import require_grant
from app.oidc.claims import CREDENTIALS_SCOPE
from app.settings import current
from app.tenancy.auth import TOKEN_HEADER, api_token_required, authenticate_request, current_caller, unstamped_caller
from app.web.hot import HotAnswer, HotRequest, hot, json_answer

blp = Blueprint("credentials", __name__, description="Verifiable credentials: store, verify, Bitstring Status Lists")

STATUS_LIST_MIMETYPE = "application/vc+ld+json"
NOT_VERIFIED_RESPONSE = {
    "400": {
        "description": "Not verified (`errors` says why), or a body that is not JSON (a problem).",
        "content": {
            "application/json": {"schema": CredentialVerifyOut},
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}},
        },
    }
}


def _json_text(text: str, status: int, headers: dict[str, str] | None = None) -> Response:
    return current_app.response_class(text, status=status, mimetype="application/json", headers=headers or {})


def _token_unless_open(view: Callable) -> Callable:
    """Require an API token unless `VC_VERIFY_OPEN` opens the endpoint (conformance test suites)."""
    protected = api_token_required(view)

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if current(CredentialSettings).verify_open:
            return view(*args, **kwargs)
        return protected(*args, **kwargs)

    return problem_doc(401)(Blueprint.doc(security=[{"ApiToken": []}, {}])(wrapper))


@blp.route("/v1/vc/issuer/store", methods=["POST"])
@api_token_required(subclient=True)
@idempotent
@blp.arguments(StoreCredentialIn)
@blp.response(201, StoredCredentialEnvelope, headers=BARE_LOCATION_HEADER)
@blp.alt_response(200, schema=StoredCredentialEnvelope, description="The same credential was already stored.")
@problem_doc(400, 413, 415, 422)
def store_credential(_args: dict):
    """Store a signed credential for a user of your tree; its proofs are then checked by a job.

    `vc` is stored and answered byte for byte as sent. `cid` is the CIDv1 of its RFC 8785 form;
    storing the same credential again answers 200 with the same record. Follow the record at
    `GET /v1/vc/issuer/credentials/{cid}` for `verification`. A credential over the verification
    budget is not stored: 422 `too_many_proofs` or `verification_size_limit`.
    """
    vc, vc_text = service.read_member_text(request.get_data(cache=True), "vc")
    record, created = service.store_credential(current_caller(), vc, vc_text)
    location = url_for("credentials.get_credential", cid=record.cid)
    return _json_text(service.stored_credential_json(record), 201 if created else 200, {"Location": location})


@blp.route("/v1/vc/issuer/credentials/<string:cid>", methods=["GET"])
@api_token_required(subclient=True)
@blp.response(200, CredentialRecordEnvelope)
@problem_doc(404)
def get_credential(cid: str):
    """Read a stored credential and its verification state (pending, verified or failed)."""
    record = service.require_credential(current_caller(), cid)
    return _json_text(service.stored_credential_json(record, with_record=True), 200)


@blp.route("/v1/openidc/credentials", methods=["GET"])
@blp.doc(security=[{"BearerToken": []}])
@blp.response(200, CredentialListEnvelope)
@problem_doc(401, 403)
def list_user_credentials():
    """The calling user's verified credentials, newest first, each byte for byte as stored.

    The access token of any code exchange with `scope=openid` reads them once the user consented
    and while the client's registration `reads_credentials` (else 403 `insufficient_scope`).
    """
    claims, _grant = require_grant(CREDENTIALS_SCOPE)
    return _json_text(service.user_credentials_json(claims.user_id), 200, {"Cache-Control": "no-store"})


def _verify_contract(view: Callable) -> Callable:
    """What both verify paths take and answer: the body, 200 when verified, 400 when not, problems."""
    view = problem_doc(413, 415, 422)(view)
    view = blp.doc(responses=NOT_VERIFIED_RESPONSE)(view)
    view = blp.response(200, CredentialVerifyOut)(view)
    return blp.arguments(CredentialVerifyIn)(view)


def _verify(args: dict):
    result = service.verify_submitted(args["verifiableCredential"], args["options"])
    return result.as_dict(), (200 if result.verified else 400)


@blp.route("/v1/vc/verify", methods=["POST"])
@read_only
@api_token_required
@_verify_contract
def verify_credential(args: dict):
    """Verify a credential at once (W3C VC API); stores nothing.

    Answers 200 when verified and 400 with the same body when not. `options.expectedProofPurpose`
    selects the proof purpose (default assertionMethod); every proof must carry `options.challenge`
    and `options.domain` when they are sent (`invalid_challenge`, `invalid_domain`). An option the
    verifier does not honour is refused (422), never ignored. A credential over the verification
    budget is refused before any proof is checked: 422 `too_many_proofs` or
    `verification_size_limit`.
    """
    return _verify(args)


@blp.route("/credentials/verify", methods=["POST"])
@read_only
@_token_unless_open
@_verify_contract
def verify_credential_vc_api(args: dict):
    """The W3C VC API path of `POST /v1/vc/verify`; open without a token when `VC_VERIFY_OPEN` is set."""
    return _verify(args)


def _caller_unless_open(view: Callable) -> Callable:
    """Require an API token unless `VC_VERIFY_OPEN` opens the endpoint; a token sent is always read
    (a large presentation's job belongs to its client)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        open_without_token = current(CredentialSettings).verify_open and not request.headers.get(TOKEN_HEADER)
        g.caller = None if open_without_token else authenticate_request(honour_subclient=True)
        return view(*args, **kwargs)

    return problem_doc(401)(Blueprint.doc(security=[{"ApiToken": []}, {}])(wrapper))


_JOB_ENVELOPE = JobEnvelope()
PRESENTATION_NOT_VERIFIED_RESPONSE = {
    "400": {
        "description": "Not verified (`errors` says why), or a body that is not JSON (a problem).",
        "content": {
            "application/json": {"schema": PresentationVerifyOut},
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}},
        },
    }
}


@blp.route("/presentations/verify", methods=["POST"])
@_caller_unless_open
@idempotent
@blp.arguments(PresentationVerifyIn)
@blp.response(200, PresentationVerifyOut)
@blp.alt_response(
    202, schema=JobEnvelope, headers=BARE_LOCATION_HEADER, description="A large presentation, verified by a job."
)
@blp.doc(responses=PRESENTATION_NOT_VERIFIED_RESPONSE)
@problem_doc(413, 415, 422)
def verify_presentation(args: dict):
    """Verify a presentation and every credential in it (W3C VC API); stores nothing.

    Answers 200 when verified and 400 with the same body when not: `verified`, `checks`, `warnings`
    and `errors` of the whole, `presentationResult` (its shape, proofs and holder) and
    `credentialResults` (each credential checked as `POST /credentials/verify` does: proofs, validity,
    status, issuer control). The presentation's proofs must be `authentication` proofs carrying
    `options.challenge` and `options.domain` when sent, made with a key the `holder` DID authorises.
    `presentation` instead of `verifiablePresentation` (or a presentation without a proof) is verified
    for its credentials only, with the warning `presentation_not_signed`. A presentation with more
    proofs than `VP_INLINE_MAX_PROOFS` is verified by a job: 202 with the job, the answer in its
    `result`. An option the verifier does not honour is refused (422), never ignored.
    """
    vp = args["verifiablePresentation"] if "verifiablePresentation" in args else args["presentation"]
    outcome = service.verify_submitted_presentation(g.caller, vp, args["options"])
    if isinstance(outcome, dict):
        return outcome, (200 if outcome["verified"] else 400)
    body, status, headers = accepted_job(outcome)
    return current_app.json.response(_JOB_ENVELOPE.dump(body)), status, headers


@blp.route("/v1/vc/issuer/status_entries", methods=["POST"])
@api_token_required(subclient=True)
@idempotent
@blp.arguments(StatusEntryIn)
@blp.response(201, StatusEntryEnvelope)
@problem_doc(400, 413, 415, 422)
def create_status_entry(args: dict):
    """Allocate a Bitstring Status List entry to put in `credentialStatus` before signing."""
    return {"data": service.allocate_status_entry(current_caller(), args["statusPurpose"])}


@blp.route("/v1/vc/issuer/status_entries/<string:entry_id>", methods=["GET"])
@api_token_required(subclient=True)
@blp.response(200, StatusEntryEnvelope)
@problem_doc(404)
def get_status_entry(entry_id: str):
    """Read a status entry of your tree."""
    return {"data": service.status_entry(current_caller(), entry_id)}


@blp.route("/v1/vc/issuer/status_entries/<string:entry_id>", methods=["PATCH"])
@api_token_required(subclient=True)
@blp.arguments(StatusEntryPatch)
@blp.response(200, StatusEntryEnvelope)
@problem_doc(400, 404, 409, 413, 415, 422)
def update_status_entry(args: dict, entry_id: str):
    """Revoke (final), suspend or reinstate an entry; its list is re-signed at once.

    Stored credentials that use the entry are verified again.
    """
    return {"data": service.change_status_entry(current_caller(), entry_id, args["status"])}


@blp.route("/status/lists/<string:list_id>", methods=["GET"])
@blp.doc(
    responses={
        "200": {
            "description": "The signed BitstringStatusListCredential.",
            "content": {STATUS_LIST_MIMETYPE: {"schema": {"type": "object"}}},
        }
    }
)
@problem_doc(404)
def get_status_list(list_id: str):
    """A status list credential the service hosts (public; cache it for `ttl`)."""
    text, ttl = service.status_list_credential(list_id)
    response = current_app.response_class(text, status=200, mimetype=STATUS_LIST_MIMETYPE)
    response.headers["Cache-Control"] = f"public, max-age={ttl}"
    response.set_etag(hashlib.sha256(text.encode("utf-8")).hexdigest()[:32])
    return response.make_conditional(request)


_VERIFY_IN, _VERIFY_OUT = CredentialVerifyIn(), CredentialVerifyOut()


@hot.route("POST", r"/v1/vc/verify", view="credentials.verify_credential", media_type="application/json", cookies=False)
@hot.route(
    "POST",
    r"/credentials/verify",
    view="credentials.verify_credential_vc_api",
    media_type="application/json",
    cookies=False,
)
def verify_at_once(request: HotRequest) -> HotAnswer | None:
    """A verification, what callers wait on: the view's schemas and `service.verify_submitted`, for
    a valid token whose last use needs no stamp (or the open VC API endpoint). Anything else (no
    or bad token, a body the schema refuses, a credential over the budget) is the view's."""
    with request.app.app_context():
        if not (request.environ["PATH_INFO"] == "/credentials/verify" and current(CredentialSettings).verify_open):
            with request.unit_of_work() as connection:
                if unstamped_caller(request.header("HTTP_X_API_TOKEN"), connection) is None:
                    return request.hand_off("token unknown, revoked, expired or its use to stamp")
        try:
            args = _VERIFY_IN.load(parse_json_body(request.body or b""))
        except (ValueError, ValidationError):  # malformed JSON (a ValueError) or refused by the schema
            return request.hand_off("a body the view refuses")
        result = service.verify_submitted(args["verifiableCredential"], args["options"])
        return json_answer(request.app, 200 if result.verified else 400, _VERIFY_OUT.dump(result.as_dict()))
