"""Wire shapes of the OpenID endpoints (documentation of the JSON they answer)."""

from __future__ import annotations

import marshmallow as ma

from app.db import isoformat
from app.oidc.text import has_unstorable


class TokenRequest(ma.Schema):
    grant_type = ma.fields.String(required=True, validate=ma.validate.OneOf(["authorization_code"]))
    code = ma.fields.String(required=True, validate=ma.validate.Length(min=1))
    client_id = ma.fields.String(metadata={"description": "Required unless sent with HTTP Basic."})
    client_secret = ma.fields.String(metadata={"description": "Required unless sent with HTTP Basic."})
    redirect_uri = ma.fields.String(required=True, validate=ma.validate.Length(min=1))
    code_verifier = ma.fields.String(metadata={"description": "PKCE verifier, when the request had a challenge."})


class TokenOut(ma.Schema):
    scope = ma.fields.String(required=True, metadata={"example": "openid"})
    token_type = ma.fields.String(required=True, metadata={"example": "Bearer"})
    access_token = ma.fields.String(required=True, metadata={"description": "RFC 9068 JWT (typ at+jwt)."})
    expire_in = ma.fields.Integer(required=True, metadata={"description": "Seconds until the access token expires."})
    expires_in = ma.fields.Integer(required=True, metadata={"description": "Same as expire_in (RFC 6749 name)."})
    id_token = ma.fields.String(required=True)


class OAuthErrorOut(ma.Schema):
    error = ma.fields.String(required=True, metadata={"example": "invalid_grant"})
    error_description = ma.fields.String()


class TokenParameter(ma.Schema):
    token = ma.fields.String(required=True)
    token_type_hint = ma.fields.String()
    client_id = ma.fields.String()
    client_secret = ma.fields.String()


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
    user_id = ma.fields.Integer()


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

