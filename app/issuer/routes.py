"""HTTP surface of the issuer and holder: keys per client, their did:web documents, VC API issue,
derive and create presentation."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from flask import current_app, url_for
from flask_smorest import Blueprint

from app.http import BARE_LOCATION_HEADER, id_parameter, path_id, problem_doc
from app.idempotency.service import idempotent
from app.issuer import keys, service, vouching
from app.issuer.schemas import (
    DeriveIn,
    IssueIn,
    IssuerKeyEnvelope,
    IssuerKeyIn,
    IssuerKeyListEnvelope,
    PresentIn,
    VerifiableCredentialOut,
    VerifiablePresentationOut,
)
from app.oidc.auth import presents_access_token, require_bearer_token, require_grant, require_user_by_id
from app.oidc.claims import CREDENTIALS_SCOPE
from app.tenancy.auth import api_token_required, authenticate_request, current_caller

blp = Blueprint(
    "issuer",
    __name__,
    description="Issuing and holding credentials: issuer keys, did:web, VC API issue, derive and presentations",
)

KEY_ID = [{"in": "path", "name": "key_id", "required": True, "schema": {"type": "string", "format": "uuid"}}]


def _json(text: str, status: int, headers: dict[str, str] | None = None):
    return current_app.response_class(text, status=status, mimetype="application/json", headers=headers or {})


@blp.route("/v1/issuer/keys", methods=["POST"])
@api_token_required(subclient=True)
@idempotent
@blp.arguments(IssuerKeyIn)
@blp.response(201, IssuerKeyEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 413, 415, 422)
def create_key(args: dict):
    """Create an active signing key (Ed25519, P-256, P-384 or Bls12381G2) for the acting client.

    It is published at once in the client's did:web document and is also usable as a did:key.
    """
    key = keys.create_key(current_caller(), args["type"])
    return {"data": keys.key_view(key)}, 201, {"Location": url_for("issuer.get_key", key_id=key.id)}


@blp.route("/v1/issuer/keys", methods=["GET"])
@api_token_required(subclient=True)
@blp.response(200, IssuerKeyListEnvelope)
def list_keys():
    """The acting client's issuer keys, active first, newest first."""
    return {"data": [keys.key_view(key) for key in keys.list_keys(current_caller())]}


@blp.route("/v1/issuer/keys/<string:key_id>", methods=["GET"], parameters=KEY_ID)
@api_token_required(subclient=True)
@blp.response(200, IssuerKeyEnvelope)
@problem_doc(404)
def get_key(key_id: str):
    """Read an issuer key of the acting client (never its private part)."""
    return {"data": keys.key_view(keys.require_key(current_caller(), key_id))}


@blp.route("/v1/issuer/keys/<string:key_id>/rotate", methods=["POST"], parameters=KEY_ID)
@api_token_required(subclient=True)
@idempotent
@blp.response(201, IssuerKeyEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(404, 409)
def rotate_key(key_id: str):
    """Retire an active key and create a new one of its type; answers the new key.

    The retired key stays in the DID document, so what it signed keeps verifying.
    """
    key = keys.rotate_key(current_caller(), key_id)
    return {"data": keys.key_view(key)}, 201, {"Location": url_for("issuer.get_key", key_id=key.id)}


@blp.route("/v1/issuer/keys/<string:key_id>/retire", methods=["POST"], parameters=KEY_ID)
@api_token_required(subclient=True)
@blp.response(200, IssuerKeyEnvelope)
@problem_doc(404)
def retire_key(key_id: str):
    """Stop signing with a key; it stays published so credentials it signed keep verifying."""
    return {"data": keys.key_view(keys.retire_key(current_caller(), key_id))}


@blp.route(
    "/clients/<client_id>/did.json",
    methods=["GET"],
    parameters=[id_parameter("client_id", "A client that issues credentials.")],
)
@blp.doc(
    responses={
        "200": {"description": "The client's did:web document.", "content": {"application/json": {"schema": {}}}}
    }
)
@problem_doc(404, 422)
def get_did_document(client_id: str):
    """The did:web document of a client (public): every issuer key it has had."""
    document = keys.did_document(path_id(client_id, "client_id"))
    response = current_app.json.response(document)
    response.headers["Cache-Control"] = "no-cache"
    return response


@blp.route("/credentials/issue", methods=["POST"])
@api_token_required(subclient=True)
@idempotent
@blp.arguments(IssueIn)
@blp.response(
    201,
    VerifiableCredentialOut,
    headers={"Location": {"schema": {"type": "string"}}, "Link": {"schema": {"type": "string"}}},
)
@problem_doc(400, 413, 415, 422)
def issue_credential(args: dict):
    """Sign a credential with one of the acting client's keys (W3C VC API issue).

    `options.keyId` picks the key (default: the newest active key the suite can use, or the
    client's newest active key), `options.cryptosuite` the suite (default: the key type's,
    eddsa-rdfc-2022, ecdsa-rdfc-2019 or bbs-2023),
    `options.mandatoryPointers` the always-disclosed claims of a bbs-2023 / ecdsa-sd-2023 base
    proof, `options.credentialStatus` asks for a Bitstring Status List entry (the `Link` header
    `rel="status-entry"` names it, to revoke or suspend it later). `issuer`, when
    left out, becomes the client's did:web. When the subject is a user of the caller's tree
    (`options.userId`, or `credentialSubject.id` is a user's DID), the credential is also stored
    for that user as `POST /v1/vc/issuer/store` would, and `Location` names the stored record.
    """
    issued = service.issue_credential(current_caller(), args["credential"], args["options"])
    headers = {}
    if issued.record is not None:
        headers["Location"] = url_for("credentials.get_credential", cid=issued.record.cid)
    if issued.status_entry_id is not None:
        entry = url_for("credentials.get_status_entry", entry_id=issued.status_entry_id)
        headers["Link"] = f'<{entry}>; rel="status-entry"'
    return _json('{"verifiableCredential":' + issued.text + "}", 201, headers)


def _holder_or_client(view: Callable) -> Callable:
    """Accept a user's Bearer access token or a client's x-api-token; the view receives the holder:
    `caller` (a client) or `user_id` (a user)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if presents_access_token():
            return view(*args, caller=None, user_id=require_bearer_token().user_id, **kwargs)
        return view(*args, caller=authenticate_request(honour_subclient=False), user_id=None, **kwargs)

    return problem_doc(401)(Blueprint.doc(security=[{"BearerToken": []}, {"ApiToken": []}])(wrapper))


DERIVED_CREDENTIAL_RESPONSE = {
    "201": {
        "description": "The derived credential itself, as the VC API answers it.",
        "content": {"application/json": {"schema": {"type": "object", "required": ["@context", "proof"]}}},
    }
}


@blp.route("/credentials/derive", methods=["POST"])
@_holder_or_client
@blp.arguments(DeriveIn)
@blp.doc(responses=DERIVED_CREDENTIAL_RESPONSE)
@problem_doc(400, 403, 413, 415, 422)
def derive_credential(args: dict, *, caller, user_id):
    """Derive a selective disclosure from a bbs-2023 or ecdsa-sd-2023 base proof (W3C VC API derive).

    Answers 201 with the derived credential itself (not wrapped). `verifiableCredential` is the
    credential with its base proof, or `{"id": <cid>}` naming a verified credential stored for you
    (the user of the access token, when its grant reads the credential list, or your client tree;
    `cid` is an alias of `id`).
    `options.selectivePointers` lists the JSON pointers to disclose besides the mandatory ones;
    `options.presentationHeader` (bbs-2023) binds the proof to a verifier's challenge.
    """
    if user_id is not None and service.names_stored_credential(args["verifiableCredential"]):
        require_grant(CREDENTIALS_SCOPE)  # a user's stored credentials are read through the consent gate
    derived = service.derive_credential(args["verifiableCredential"], args["options"], caller=caller, user_id=user_id)
    return current_app.json.response(derived), 201


@blp.route("/presentations", methods=["POST"])
@api_token_required(subclient=True)
@idempotent
@blp.arguments(PresentIn)
@blp.response(201, VerifiablePresentationOut)
@problem_doc(400, 413, 415, 422)
def create_presentation(args: dict):
    """Sign a presentation with a key of the acting client as holder (W3C VC API create presentation).

    `presentation.verifiableCredential` holds credentials, each in full or as `{"id": <cid>}` naming a
    verified credential stored in your tree. The proof is an `authentication` proof carrying
    `options.challenge` and `options.domain`, made with `options.verificationMethod` (a key's
    did:web or did:key method), `options.keyId` or the newest active Ed25519, P-256 or P-384 key;
    `holder` is that method's DID.
    """
    presentation = service.create_presentation(current_caller(), args["presentation"], args["options"])
    return {"verifiablePresentation": presentation}, 201


USER_ID = [id_parameter("user_id", "The user the credential is about.")]
PLATFORM = [{"in": "path", "name": "platform", "required": True, "schema": {"type": "string"}}]


@blp.route("/v1/user/<user_id>/credentials/email", methods=["POST"], parameters=USER_ID)
@blp.doc(security=[{"BearerToken": []}])
@blp.response(201, VerifiableCredentialOut)
@problem_doc(401, 403, 404, 422)
def vouch_for_email(user_id: str):
    """A credential, signed by the service, that the calling user controls their e-mail address.

    Only the user asks for it, with an access token that may read the address (the `email` scope,
    consented): the login behind the token proved the address with a mailed code. `verifiedAt` is
    when that token was issued. Another user's id is a 404; a token without the address is a 403;
    a pairwise client's token is a 403 `pairwise_subject` whatever the id (the credential names the DID).
    """
    claims = require_user_by_id(path_id(user_id, "user_id"), "email")
    return _json('{"verifiableCredential":' + vouching.email_credential(claims.user_id, claims.iat) + "}", 201)


@blp.route("/v1/user/<user_id>/credentials/social/<string:platform>", methods=["POST"], parameters=USER_ID + PLATFORM)
@blp.doc(security=[{"BearerToken": []}, {"ApiToken": []}])
@blp.response(201, VerifiableCredentialOut)
@problem_doc(401, 403, 404, 422)
def vouch_for_social_account(user_id: str, platform: str):
    """A credential, signed by the service, about the user's linked account on `platform`.

    Asked by the user (access token, own id only) or by a client for a user of its acting
    subtree (x-api-token, x-api-subclient-id honoured). The subject names the platform, the
    account id (and name) and `verifiedAt`, when the platform's sign-in linked it.
    A missing or broken link is a 404; a pairwise client's token is a 403 `pairwise_subject`
    whatever the id.
    """
    uid = path_id(user_id, "user_id")
    if presents_access_token():
        user = vouching.user_of_token(require_user_by_id(uid).user_id)
    else:
        user = vouching.user_for_client(authenticate_request(honour_subclient=True), uid)
    return _json('{"verifiableCredential":' + vouching.social_account_credential(user, platform) + "}", 201)
