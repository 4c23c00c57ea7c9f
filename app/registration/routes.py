"""HTTP surface of dynamic client registration: RFC 7591 registration, RFC 7592 management,
initial access tokens for master clients, and what their registrations may ask for.

Registration errors are RFC 7591 §3.2.2 bodies (`{error, error_description}`), a bad bearer token
RFC 6750 `invalid_token` (401); answers are never cached.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Response, jsonify, request
from flask_smorest import Blueprint

from app.db import read_only
from app.http import no_store, problem_doc
from app.oidc.errors import OAuthError, oauth_error_response
from app.oidc.routes import add_discovery_metadata
from app.oidc.schemas import OAuthErrorOut
from app.oidc.settings import OidcSettings
from app.registration import service
from app.registration.schemas import (
    ClientInformationOut,
    ClientMetadataIn,
    InitialAccessTokenEnvelope,
    InitialAccessTokenIn,
    RegistrationPolicyEnvelope,
    RegistrationPolicyIn,
)
from app.registration.settings import RegistrationSettings
from app.settings import current
from app.tenancy.auth import api_token_required, current_caller

blp = Blueprint("registration", __name__, description="Dynamic client registration (RFC 7591, RFC 7592)")

JSON = "application/json"
REGISTER_PATH = "/v1/openidc/register"
_ERRORS = {
    str(status): {"description": description, "content": {JSON: {"schema": OAuthErrorOut}}}
    for status, description in (
        (400, "invalid_client_metadata or invalid_redirect_uri (RFC 7591 §3.2.2)"),
        (401, "invalid_token: the bearer token is missing, unknown, expired or revoked"),
    )
}
_BEARER = [{"BearerToken": []}]


@blp.record_once
def _setup(state) -> None:
    add_discovery_metadata(state.app, _discovery_members)


def _discovery_members(origin: str) -> dict:
    if not current(RegistrationSettings).enabled:
        return {}
    return {"registration_endpoint": f"{origin}{REGISTER_PATH}"}


@blp.errorhandler(OAuthError)
def _handle_oauth_error(error: OAuthError) -> Response:
    return oauth_error_response(error)


def _bearer() -> str | None:
    auth = request.authorization
    return auth.token if auth is not None and auth.type == "bearer" else None


def _answer(registration: service.Registration, status: int) -> Response:
    parts = urlsplit(current(OidcSettings).issuer)
    uri = f"{parts.scheme}://{parts.netloc}{REGISTER_PATH}/{registration.client.id}"
    response = jsonify(service.registration_document(registration, uri))
    response.status_code = status
    return response


@blp.route(REGISTER_PATH, methods=["POST"])
@no_store
@blp.doc(security=_BEARER, requestBody={"content": {JSON: {"schema": ClientMetadataIn}}}, responses=_ERRORS)
@blp.response(201, ClientInformationOut)
def register():
    """Register a client (RFC 7591) with `Authorization: Bearer <initial access token>`.

    The client is a sub-client of the master client the token was issued to. The answer holds its
    `client_secret` (once) and the `registration_access_token` that manages it at
    `registration_client_uri`.
    """
    return _answer(service.register_client(_bearer(), request.get_json(silent=True)), 201)


@blp.route(f"{REGISTER_PATH}/<int:client_id>", methods=["GET"])
@no_store
@blp.doc(security=_BEARER, responses=_ERRORS)
@blp.response(200, ClientInformationOut)
def read_registration(client_id: int):
    """Read a registration (RFC 7592) with `Authorization: Bearer <registration access token>`;
    the answer carries a new registration access token, which replaces the one presented."""
    return _answer(service.read_client(client_id, _bearer()), 200)


@blp.route(f"{REGISTER_PATH}/<int:client_id>", methods=["PUT"])
@no_store
@blp.doc(security=_BEARER, requestBody={"content": {JSON: {"schema": ClientMetadataIn}}}, responses=_ERRORS)
@blp.response(200, ClientInformationOut)
def update_registration(client_id: int):
    """Replace a registration's metadata (RFC 7592): members left out return to their defaults.
    The client secret is kept; the answer carries a new registration access token."""
    return _answer(service.update_client(client_id, _bearer(), request.get_json(silent=True)), 200)


@blp.route(f"{REGISTER_PATH}/<int:client_id>", methods=["DELETE"])
@blp.doc(security=_BEARER, responses=_ERRORS)
@blp.response(204)
def delete_registration(client_id: int):
    """Deregister a client (RFC 7592): it is disabled, and its registration access token stops working."""
    service.delete_client(client_id, _bearer())
    return ""


@blp.route("/v1/openidc/initial_access_tokens", methods=["POST"])
@api_token_required(subclient=True)
@no_store
@blp.arguments(InitialAccessTokenIn, required=False)
@blp.response(201, InitialAccessTokenEnvelope)
@problem_doc(403, 404, 422)
def create_initial_access_token(fields: dict):
    """Issue an initial access token that registers sub-clients of the acting node: the caller's
    master client, or the node of its tree `x-api-subclient-id` selects (outside it: 404).

    The token is shown only in this answer (it is stored hashed). A sub-client's API token gets 403.
    """
    issued = service.create_initial_token(current_caller(), name=fields["name"], expires_in=fields["expires_in"])
    token = issued.token
    return {
        "data": {
            "id": token.id,
            "client_id": token.client_id,
            "name": token.name,
            "prefix": token.prefix,
            "token": issued.plaintext,
            "created_at": token.created_at,
            "expires_at": token.expires_at,
        }
    }, 201


@blp.route("/v1/openidc/registration_policy", methods=["GET"])
@read_only
@api_token_required(subclient=True)
@blp.response(200, RegistrationPolicyEnvelope)
@problem_doc(403, 404, 422)
def read_registration_policy():
    """What the clients registered under the acting node's initial access tokens may ask for. A
    sub-client's API token gets 403."""
    caller = current_caller()
    return {"data": _policy(caller.acting_client_id, service.registration_policy(caller))}


@blp.route("/v1/openidc/registration_policy", methods=["PUT"])
@api_token_required(subclient=True)
@blp.arguments(RegistrationPolicyIn)
@blp.response(200, RegistrationPolicyEnvelope)
@problem_doc(400, 403, 404, 413, 415, 422)
def update_registration_policy(fields: dict):
    """Set the scopes the clients registered under the acting node's initial access tokens may ask
    their `client_credentials` grant to be given (RFC 7591 `scope`; none until set). A registration
    or update asking for another is refused `invalid_client_metadata`. A sub-client's API token gets 403.
    """
    caller = current_caller()
    scopes = service.set_registration_scopes(caller, fields["client_credentials_scopes"])
    return {"data": _policy(caller.acting_client_id, scopes)}


def _policy(client_id: int, scopes: tuple[str, ...]) -> dict:
    return {"client_id": client_id, "client_credentials_scopes": list(scopes)}
