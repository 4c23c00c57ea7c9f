"""Pushed authorization requests (RFC 9126): a client posts its authorization request to `/par`
and sends the browser with only `client_id` and the returned `request_uri`, which is short-lived
(`OIDC_PAR_TTL`) and redeemable once. Functions flush but never commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from sqlalchemy import update

from app.db import utcnow
from app.extensions import db
from app.oidc import dpop, request_objects
from app.oidc.authorize import validate_authorization_request
from app.oidc.errors import (
    AuthorizationPageError,
    AuthorizationRedirectError,
    InvalidDpopProof,
    InvalidRequest,
    OAuthError,
)
from app.oidc.models import PushedRequest
from app.oidc.service import remember_proof
from app.oidc.settings import OidcSettings
from app.security import hash_secret, random_token
from app.settings import current
from app.tenancy.models import Client

REQUEST_URI_PREFIX = "urn:ietf:params:oauth:request_uri:"


class PushedRequestInvalid(OAuthError):
    """An error of the authorization request itself, with its RFC 6749 §4.1.2.1 code."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error


def _hash(reference: str) -> str:
    return hash_secret("par:" + reference)


def push_request(client: Client, raw: Mapping[str, str], proof: dpop.Proof | None = None) -> dict:
    """Validate and store an authorization request of the authenticated `client`; with a DPoP
    `proof` (`service.token_request_proof`) its code is bound to the proof's key, as by `dpop_jkt`
    (RFC 9449 §10.1).

    A `request` object among them is verified and its parameters stored in its place. Raises
    InvalidRequest when it names another client or carries a request_uri, InvalidDpopProof when
    `dpop_jkt` names another key than the proof's or the proof was used before, and
    PushedRequestInvalid with the authorization endpoint's error otherwise (`invalid_request_object`
    for the object).
    """
    parameters = {
        name: value
        for name, value in raw.items()
        if name not in ("client_secret", "client_assertion", "client_assertion_type")
    }
    if parameters.get("client_id", str(client.id)) != str(client.id):
        raise InvalidRequest("client_id differs from the authenticated client.")
    if "request_uri" in parameters:
        raise InvalidRequest("A pushed request cannot itself carry a request_uri.")
    parameters["client_id"] = str(client.id)
    signed = bool(parameters.get("request")) and request_objects.enabled()
    try:
        if signed:
            parameters = request_objects.merged_parameters(parameters, client)
        if proof is not None:  # after the object's parameters, which may name a dpop_jkt too
            if parameters.get("dpop_jkt", proof.jkt) != proof.jkt:
                raise InvalidDpopProof("dpop_jkt names another key than the DPoP proof's.")
            parameters["dpop_jkt"] = proof.jkt
        validate_authorization_request(parameters, pushed=True, signed=signed)
    except request_objects.RequestObjectRefused as error:
        raise PushedRequestInvalid("invalid_request_object", str(error)) from None
    except AuthorizationRedirectError as error:
        raise PushedRequestInvalid(error.error, error.description) from None
    except AuthorizationPageError as error:
        raise InvalidRequest(error.message) from None
    reference = random_token(32)
    ttl = current(OidcSettings).par_ttl
    db.session.add(
        PushedRequest(
            reference_hash=_hash(reference),
            client_id=client.id,
            parameters=parameters,
            signed_request_object=signed,
            expires_at=utcnow() + timedelta(seconds=ttl),
        )
    )
    db.session.flush()
    if proof is not None:
        remember_proof(proof)
    return {"request_uri": REQUEST_URI_PREFIX + reference, "expires_in": ttl}


def redeem_request(raw: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """The pushed parameters behind `request_uri`, consumed, and whether they came in a signed
    request object; AuthorizationPageError if unusable.

    One conditional UPDATE consumes it, so of two concurrent redemptions only one succeeds.
    """
    gone = AuthorizationPageError(
        "This sign-in link has expired or was already used. Go back to the application and start again."
    )
    request_uri = raw.get("request_uri") or ""
    if not request_uri.startswith(REQUEST_URI_PREFIX):
        raise gone
    row = db.session.execute(
        update(PushedRequest)
        .where(
            PushedRequest.reference_hash == _hash(request_uri[len(REQUEST_URI_PREFIX) :]),
            PushedRequest.used_at.is_(None),
            PushedRequest.expires_at > utcnow(),
        )
        .values(used_at=utcnow())
        .returning(PushedRequest.client_id, PushedRequest.parameters, PushedRequest.signed_request_object)
        .execution_options(synchronize_session=False)
    ).first()
    if row is None or raw.get("client_id") != str(row.client_id):
        raise gone
    return dict(row.parameters), bool(row.signed_request_object)
