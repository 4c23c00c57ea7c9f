"""Request authentication by OpenID access token: the HTTP edge of `service.verify_access_token`.

Routes of any feature that serve a user through a relying party call `require_grant` with what
they release (the gate of `app.oidc.grants`), or `require_bearer_token` when they release nothing.
"""

from __future__ import annotations

from flask import g, request

from app.oidc.errors import InvalidBearerToken, MissingBearerToken
from app.oidc.grants import Grant
from app.oidc.service import token_grant, verify_access_token
from app.oidc.tokens import AccessTokenClaims

FORM = "application/x-www-form-urlencoded"


def bearer_from_request() -> str:
    """The access token of this request: `Authorization: Bearer`, or a form `access_token` (RFC 6750 §2.2).

    Raises MissingBearerToken (401 with `WWW-Authenticate: Bearer`) when there is none.
    """
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if request.method == "POST" and request.mimetype == FORM:
        form_token = request.form.get("access_token", "")
        if form_token:
            return form_token
    raise MissingBearerToken("Send the access token as `Authorization: Bearer <token>`.")


def require_bearer_token() -> AccessTokenClaims:
    """Authenticate this request by its Bearer access token of a user.

    Checks signature (published keys only, algorithm allow-list), `typ`, `iss`, `aud`, `exp`, the
    `jti` deny-list, that the client still exists and that the token is a user's. Raises
    MissingBearerToken / InvalidBearerToken (401 with `WWW-Authenticate: Bearer`). The claims are
    also left in `flask.g.access_token`.
    """
    claims = verify_access_token(bearer_from_request())
    if claims.user_id is None:
        raise InvalidBearerToken("This endpoint serves a user: a client_credentials token has none.")
    g.access_token = claims
    return claims


def require_grant(item: str) -> tuple[AccessTokenClaims, Grant]:
    """`require_bearer_token`, then the gate: what the token may read must include `item` (a
    standard scope, `app_claims` or `credentials`), else InsufficientScope (403)."""
    claims = require_bearer_token()
    grant = token_grant(claims)
    grant.require(item)
    return claims, grant
