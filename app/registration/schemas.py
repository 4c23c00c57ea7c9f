"""Wire shapes of dynamic client registration (RFC 7591/7592) and of initial access tokens."""

from __future__ import annotations

import marshmallow as ma

from app.registration.metadata import MAX_SCOPES, SCOPE_TOKEN
from app.tenancy.fields import PlainText, UtcTimestamp

_DAY = 24 * 3600


class ClientMetadataIn(ma.Schema):
    """Client metadata a registration may send (RFC 7591 §2, OpenID Connect Registration §2); other
    members are ignored. Checked by the service, which answers RFC 7591 errors."""

    class Meta:
        unknown = ma.INCLUDE

    redirect_uris = ma.fields.List(
        ma.fields.String(),
        metadata={
            "description": "Required for authorization_code. web clients: https, never localhost; native "
            "clients: https, or http to a loopback address. No fragment."
        },
    )
    grant_types = ma.fields.List(
        ma.fields.String(),
        metadata={
            "description": "authorization_code (default), refresh_token, client_credentials, "
            "urn:ietf:params:oauth:grant-type:device_code"
        },
    )
    response_types = ma.fields.List(ma.fields.String(), metadata={"description": "code, with authorization_code"})
    application_type = ma.fields.String(metadata={"description": "web (default) or native"})
    client_name = ma.fields.String(metadata={"description": "1 to 70 characters; shown on the sign-in pages"})
    logo_uri = ma.fields.String(metadata={"description": "https URL of the logo of the sign-in pages"})
    token_endpoint_auth_method = ma.fields.String(
        metadata={
            "description": "client_secret_basic (default), client_secret_post, client_secret_jwt or private_key_jwt"
        }
    )
    jwks = ma.fields.Dict(metadata={"description": "Public JWK set (not with jwks_uri)"})
    jwks_uri = ma.fields.String(metadata={"description": "URL of the public JWK set, fetched when registering"})
    id_token_signed_response_alg = ma.fields.String(metadata={"description": "RS256 (default), ES256, EdDSA"})
    scope = ma.fields.String(metadata={"description": "Scopes the client_credentials grant may be given"})
    require_signed_request_object = ma.fields.Boolean()
    require_pushed_authorization_requests = ma.fields.Boolean()
    subject_type = ma.fields.String(metadata={"description": "public (default) or pairwise (when turned on)"})
    sector_identifier_uri = ma.fields.String(
        metadata={"description": "pairwise: https URL of a JSON array of every redirect URI; its host is the sector"}
    )
    userinfo_signed_response_alg = ma.fields.String(
        metadata={"description": "RS256, ES256 or EdDSA: userinfo answers as a signed JWT (default: plain JSON)"}
    )
    authorization_signed_response_alg = ma.fields.String(
        metadata={"description": "RS256 (default), ES256 or EdDSA: the JWS algorithm of JARM responses"}
    )
    dpop_bound_access_tokens = ma.fields.Boolean(
        metadata={"description": "Every token request must carry a DPoP proof (RFC 9449 §5.2)"}
    )


class ClientInformationOut(ClientMetadataIn):
    """The client information response (RFC 7591 §3.2.1, RFC 7592 §3)."""

    client_id = ma.fields.String(required=True)
    client_secret = ma.fields.String(metadata={"description": "Only when registering; shown once"})
    client_secret_expires_at = ma.fields.Integer(metadata={"description": "0: the secret does not expire"})
    client_id_issued_at = ma.fields.Integer(required=True)
    registration_access_token = ma.fields.String(
        required=True, metadata={"description": "Manages this registration; replaced by every read and update"}
    )
    registration_client_uri = ma.fields.String(required=True)


class InitialAccessTokenIn(ma.Schema):
    name = PlainText(
        load_default="", validate=ma.validate.Length(max=100), metadata={"description": "A label for your records."}
    )
    expires_in = ma.fields.Integer(
        load_default=None,
        allow_none=True,
        validate=ma.validate.Range(min=60, max=365 * _DAY),
        metadata={"description": "Seconds the token registers clients; default OIDC_INITIAL_ACCESS_TOKEN_TTL."},
    )


class InitialAccessTokenOut(ma.Schema):
    id = ma.fields.Integer(required=True)
    client_id = ma.fields.Integer(required=True)
    name = ma.fields.String(required=True)
    prefix = ma.fields.String(required=True)
    token = ma.fields.String(required=True, metadata={"description": "The bearer token; shown only once."})
    created_at = UtcTimestamp(required=True)
    expires_at = UtcTimestamp(allow_none=True)


class InitialAccessTokenEnvelope(ma.Schema):
    data = ma.fields.Nested(InitialAccessTokenOut, required=True)


def _scope_token(value: str) -> None:
    if not SCOPE_TOKEN.fullmatch(value):
        raise ma.ValidationError("Not an RFC 6749 scope token.")


class RegistrationPolicyIn(ma.Schema):
    client_credentials_scopes = ma.fields.List(
        ma.fields.String(validate=_scope_token),
        required=True,
        validate=ma.validate.Length(max=MAX_SCOPES),
        metadata={
            "description": "The scopes a client registered under the acting node's initial access tokens may "
            "ask its client_credentials grant to be given (RFC 7591 `scope`); [] allows none."
        },
    )


class RegistrationPolicyOut(RegistrationPolicyIn):
    client_id = ma.fields.Integer(required=True, metadata={"description": "The node whose registrations it bounds."})


class RegistrationPolicyEnvelope(ma.Schema):
    data = ma.fields.Nested(RegistrationPolicyOut, required=True)
