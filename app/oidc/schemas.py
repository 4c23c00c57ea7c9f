"""Wire shapes of the OpenID endpoints (documentation of the JSON they answer)."""

from __future__ import annotations

import marshmallow as ma

from app.db import isoformat
from app.oidc.text import has_unstorable
from app.tenancy.models import GRANT_TYPES


class TokenRequest(ma.Schema):
    grant_type = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf(GRANT_TYPES),
    )
    code = ma.fields.String(validate=ma.validate.Length(min=1), metadata={"description": "authorization_code."})
    redirect_uri = ma.fields.String(validate=ma.validate.Length(min=1), metadata={"description": "authorization_code."})
    code_verifier = ma.fields.String(metadata={"description": "PKCE verifier, when the request had a challenge."})
    refresh_token = ma.fields.String(metadata={"description": "refresh_token: the newest token of its family."})
    device_code = ma.fields.String(
        metadata={"description": "urn:ietf:params:oauth:grant-type:device_code: from the device authorization."}
    )
    scope = ma.fields.String(
        metadata={
            "description": "refresh_token: a narrower scope; client_credentials: "
            "scopes the client may be granted (all when omitted)."
        }
    )
    client_id = ma.fields.String(metadata={"description": "Required unless sent with HTTP Basic or an assertion."})
    client_secret = ma.fields.String(metadata={"description": "client_secret_post."})
    client_assertion_type = ma.fields.String(
        metadata={"description": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer (RFC 7523)."}
    )
    client_assertion = ma.fields.String(metadata={"description": "client_secret_jwt (HS256) or private_key_jwt."})


class TokenOut(ma.Schema):
    scope = ma.fields.String(required=True, metadata={"example": "openid"})
    token_type = ma.fields.String(required=True, metadata={"example": "Bearer"})
    access_token = ma.fields.String(required=True, metadata={"description": "RFC 9068 JWT (typ at+jwt)."})
    expire_in = ma.fields.Integer(required=True, metadata={"description": "Seconds until the access token expires."})
    expires_in = ma.fields.Integer(required=True, metadata={"description": "Same as expire_in (RFC 6749 name)."})
    id_token = ma.fields.String(metadata={"description": "With the openid scope (not for client_credentials)."})
    refresh_token = ma.fields.String(
        metadata={"description": "With offline_access or when the client always gets one; rotates on every use."}
    )


class PushedAuthorizationRequest(ma.Schema):
    class Meta:
        unknown = ma.INCLUDE

    response_type = ma.fields.String(required=True, metadata={"example": "code"})
    client_id = ma.fields.String(metadata={"description": "The authenticated client (optional with Basic)."})
    redirect_uri = ma.fields.String(required=True)
    scope = ma.fields.String(required=True, metadata={"example": "openid profile offline_access"})
    state = ma.fields.String()
    nonce = ma.fields.String()
    code_challenge = ma.fields.String()
    code_challenge_method = ma.fields.String(metadata={"example": "S256"})
    prompt = ma.fields.String()
    max_age = ma.fields.Integer()
    login_hint = ma.fields.String()
    client_secret = ma.fields.String(metadata={"description": "client_secret_post."})
    client_assertion_type = ma.fields.String()
    client_assertion = ma.fields.String()


class PushedAuthorizationOut(ma.Schema):
    request_uri = ma.fields.String(
        required=True, metadata={"example": "urn:ietf:params:oauth:request_uri:6esc_11ACC5bwc014ltc14eY22c"}
    )
    expires_in = ma.fields.Integer(required=True, metadata={"description": "Seconds the request_uri stays usable."})


class DeviceAuthorizationRequest(ma.Schema):
    scope = ma.fields.String(metadata={"description": "Must include openid (the default).", "example": "openid"})
    client_id = ma.fields.String(metadata={"description": "Required unless sent with HTTP Basic or an assertion."})
    client_secret = ma.fields.String(metadata={"description": "client_secret_post."})
    client_assertion_type = ma.fields.String()
    client_assertion = ma.fields.String()


class DeviceAuthorizationOut(ma.Schema):
    device_code = ma.fields.String(required=True, metadata={"description": "Polled with at the token endpoint."})
    user_code = ma.fields.String(required=True, metadata={"example": "BCDF-GHJK"})
    verification_uri = ma.fields.String(required=True, metadata={"description": "The device page."})
    verification_uri_complete = ma.fields.String(required=True, metadata={"description": "With the user code."})
    expires_in = ma.fields.Integer(required=True, metadata={"description": "Seconds both codes stay usable."})
    interval = ma.fields.Integer(required=True, metadata={"description": "Seconds to wait between polls."})


class OAuthErrorOut(ma.Schema):
    error = ma.fields.String(required=True, metadata={"example": "invalid_grant"})
    error_description = ma.fields.String()


class TokenParameter(ma.Schema):
    token = ma.fields.String(required=True, metadata={"description": "An access token or a refresh token."})
    token_type_hint = ma.fields.String(validate=ma.validate.OneOf(["access_token", "refresh_token"]))
    client_id = ma.fields.String()
    client_secret = ma.fields.String()
    client_assertion_type = ma.fields.String()
    client_assertion = ma.fields.String()


class IntrospectionOut(ma.Schema):
    active = ma.fields.Boolean(required=True)
    scope = ma.fields.String()
    client_id = ma.fields.String()
    token_type = ma.fields.String()
    exp = ma.fields.Integer()
    iat = ma.fields.Integer()
    sub = ma.fields.String()
    aud = ma.fields.Raw()
    iss = ma.fields.String()
    jti = ma.fields.String()
    user_id = ma.fields.Integer(metadata={"description": "Absent from a client_credentials token."})
    cnf = ma.fields.Dict(
        metadata={"description": "`{jkt}`: the thumbprint of the DPoP key a DPoP-bound token is bound to (RFC 9449)."}
    )
    subject_type = ma.fields.String(
        validate=ma.validate.OneOf(["user", "client"]),
        metadata={
            "description": "Whose token it is: a user's (`sub` is the user id) or the client's own "
            "(client_credentials; `sub` is `client:<client_id>`, never a user's id)."
        },
    )


class UserInfoOut(ma.Schema):
    class Meta:
        unknown = ma.INCLUDE

    sub = ma.fields.String(required=True)
    user_id = ma.fields.Integer(required=True)
    did = ma.fields.String(required=True)
    given_name = ma.fields.String()
    family_name = ma.fields.String()
    email = ma.fields.String()
    email_verified = ma.fields.Boolean()


class JWKSetOut(ma.Schema):
    keys = ma.fields.List(ma.fields.Dict(), required=True)


def _storable(value: str) -> None:
    if has_unstorable(value):
        raise ma.ValidationError("Must not contain NUL bytes or unpaired surrogates.")


class OutboxArgs(ma.Schema):
    to = ma.fields.String(validate=_storable, metadata={"description": "The recipient (required)."})


class OutboxMailOut(ma.Schema):
    to = ma.fields.String(attribute="to_address", required=True)
    subject = ma.fields.String(required=True)
    text = ma.fields.String(required=True)
    sent_at = ma.fields.Function(lambda mail: isoformat(mail.sent_at), required=True)


class OutboxOut(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(OutboxMailOut), required=True)
