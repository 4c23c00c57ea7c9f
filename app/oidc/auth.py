"""Request authentication by OpenID access token: the HTTP edge of `service.verify_access_token`.

Routes of any feature that serve a user through a relying party call `require_bearer_token`.
"""

from __future__ import annotations

from flask import g, request

from app.oidc.errors import InsufficientScope, InvalidBearerToken, MissingBearerToken
from app.oidc.service import verify_access_token
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


def require_bearer_token(scope: str | None = None) -> AccessTokenClaims:
    """Authenticate this request by its Bearer access token; for every user-facing endpoint.

    Checks signature (published keys only, algorithm allow-list), `typ`, `iss`, `aud`,
    `exp`, the `jti` deny-list, that the client still exists and that the token is a user's. Raises MissingBearerToken /
    InvalidBearerToken (401 with `WWW-Authenticate: Bearer`) or InsufficientScope (403).
    The claims are also left in `flask.g.access_token`.
    """
    claims = verify_access_token(bearer_from_request())
    if claims.user_id is None:
        raise InvalidBearerToken("This endpoint serves a user: a client_credentials token has none.")
    if scope and not claims.has_scope(scope):
        raise InsufficientScope(scope)
    g.access_token = claims
    return claims
