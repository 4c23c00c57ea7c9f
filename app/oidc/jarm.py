"""JWT Secured Authorization Response Mode (JARM): an authorization response as one signed JWT.

With `response_mode` `jwt` or `query.jwt` the redirect carries `response=<JWT>` in its query, with
`fragment.jwt` in its fragment; the JWT holds the response's parameters (a code and state, or an
error) with `iss`, `aud` (the client) and `exp`, signed with the client's
`authorization_signed_response_alg` (RS256 when it set none). `OIDC_JARM_ENABLED` turns the modes
off for new requests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from app.oidc import keys, tokens
from app.oidc.settings import OidcSettings
from app.settings import current
from app.tenancy.models import Client

QUERY = "query"
# Each JWT mode and where the response goes; `jwt` is `query.jwt` for response_type=code.
JWT_MODES = {"jwt": "query", "query.jwt": "query", "fragment.jwt": "fragment"}
DEFAULT_ALG = "RS256"
# JARM §2.1 recommends a short lifetime: the response is used at once by the client.
RESPONSE_LIFETIME = 600


def response_modes() -> tuple[str, ...]:
    """The response modes a new authorization request may ask for."""
    return (QUERY, *JWT_MODES) if current(OidcSettings).jarm_enabled else (QUERY,)


def placement(mode: str | None) -> str | None:
    """Where a JWT response of `mode` goes (`query` or `fragment`); None when `mode` is not a JWT mode."""
    return JWT_MODES.get(mode or "")


def response_alg(client: Client) -> str:
    """The JWS algorithm of the client's authorization responses."""
    alg = client.authorization_signed_response_alg
    return alg if alg in keys.ALGORITHMS else DEFAULT_ALG


def sign_response(client: Client, values: Mapping[str, str]) -> str:
    """The authorization response `values` as a JWT for `client` (JARM §2.1)."""
    now = int(time.time())
    claims = {**values, "iss": tokens.issuer(), "aud": str(client.id), "iat": now, "exp": now + RESPONSE_LIFETIME}
    return tokens.sign(claims, response_alg(client), "JWT")
