"""Request objects (RFC 9101): authorization request parameters sent as a JWT the client signed.

A request object is verified with the client's registered keys (its `jwks`, or its `jwks_uri`
fetched by `prefetch_keys` before the unit of work), with an algorithm of `ALGORITHMS` (never
`none`): `iss` is the client_id, `aud` the issuer, `exp` in the future and `nbf` (when set) past,
and `exp` at most `OIDC_REQUEST_OBJECT_MAX_LIFETIME` after its `nbf` (else `iat`, else now; FAPI
1.0 Advanced §5.2.2 caps it at 60 minutes). It is used once: its `jti` (or, without one, the
object itself) is remembered by the one replay memory (`app.oidc.replay`) until it expires, and a
second use is refused (RFC 9101 §10.8). Its parameters win over those sent beside it, and its
`client_id` and `response_type`, when set, must equal those (RFC 9101 §5). Refusals raise
`RequestObjectRefused`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from joserfc import jwt
from joserfc.errors import JoseError

from app.oidc import client_auth, replay
from app.oidc.settings import OidcSettings
from app.oidc.tokens import b64_json, issuer
from app.settings import current
from app.tenancy.models import Client

ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
# Members of the JWT itself, not authorization parameters.
_JWT_MEMBERS = frozenset({"iss", "aud", "exp", "nbf", "iat", "jti", "sub"})
# Parameters that are not strings in a request object's JSON, sent as their JSON text.
_JSON_PARAMETERS = frozenset({"claims"})
_INTEGER_PARAMETERS = frozenset({"max_age"})


class RequestObjectRefused(Exception):
    """The request object cannot be used: the message says why (for the client's developer)."""


def enabled() -> bool:
    return current(OidcSettings).request_objects


def _header(token: str) -> dict:
    parts = token.split(".")
    if len(parts) == 5:
        raise RequestObjectRefused("Encrypted request objects are not supported; sign it.")
    if len(parts) != 3:
        raise RequestObjectRefused("The request object is not a signed JWT.")
    try:
        header = b64_json(parts[0])
    except (ValueError, UnicodeError, RecursionError):
        raise RequestObjectRefused("The request object's header is malformed.") from None
    if header.get("alg") not in ALGORITHMS:
        raise RequestObjectRefused(f"The request object must be signed with one of {', '.join(ALGORITHMS)}.")
    return header


def prefetch_keys(raw: Mapping[str, str]) -> None:
    """Fetch the `jwks_uri` keys that will verify the request's `request` object, unless cached.

    Called before the unit of work's first write (it may end the reads, see
    `client_auth.fetch_client_keys`); never raises: a request it cannot help is refused later.
    """
    if not enabled() or not raw.get("request"):
        return
    try:
        header = _header(raw["request"])
    except RequestObjectRefused:
        return
    client = client_auth.get_client_by_id(raw.get("client_id"))
    if client is not None:
        client_auth.fetch_client_keys(client, header.get("kid"))


def _verified_claims(token: str, client: Client) -> dict:
    header = _header(token)
    try:
        keys = client_auth.client_key_set(client, header.get("kid"))
    except client_auth.KeysUnavailable as error:
        raise RequestObjectRefused(f"The request object cannot be verified: {error}") from None
    try:
        claims = jwt.decode(token, keys, algorithms=[header["alg"]]).claims
    except (JoseError, ValueError, TypeError):
        raise RequestObjectRefused("The request object's signature does not verify with the client's keys.") from None
    now, leeway = int(time.time()), current(OidcSettings).clock_leeway
    if claims.get("iss") != str(client.id):
        raise RequestObjectRefused("The request object's iss must be the client_id.")
    audience = claims.get("aud")
    if issuer() not in (audience if isinstance(audience, list) else [audience]):
        raise RequestObjectRefused("The request object's aud must be the issuer.")
    exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
    if not _is_time(exp) or exp <= now - leeway:
        raise RequestObjectRefused("The request object has expired or lacks exp.")
    if nbf is not None and (not _is_time(nbf) or nbf > now + leeway):
        raise RequestObjectRefused("The request object is not valid yet (nbf).")
    if iat is not None and (not _is_time(iat) or iat > now + leeway):
        raise RequestObjectRefused("The request object's iat is in the future.")
    longest = current(OidcSettings).request_object_max_lifetime
    start = nbf if nbf is not None else iat if iat is not None else now
    if exp - start > longest:
        raise RequestObjectRefused(
            f"The request object lives longer than {longest} seconds: its exp must be at most that after its "
            f"{'nbf' if nbf is not None else 'iat' if iat is not None else 'use'}."
        )
    _use_once(token, claims.get("jti"), client, exp + leeway)
    return claims


def _is_time(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _use_once(token: str, jti: object, client: Client, until: int) -> None:
    """Remember the object (by its `jti`, else by its digest) until it expires; refuse a second use."""
    if jti is not None and (not isinstance(jti, str) or not jti):
        raise RequestObjectRefused("The request object's jti must be a non-empty string.")
    name = jti if jti is not None else "sha256:" + hashlib.sha256(token.encode()).hexdigest()
    if not replay.remember_once(f"request_object:{client.id}:{name}", datetime.fromtimestamp(until, UTC)):
        raise RequestObjectRefused("The request object was used before; sign a new one (with a new jti).")


def merged_parameters(raw: Mapping[str, str], client: Client) -> dict[str, str]:
    """The authorization parameters of `raw` with those of its verified `request` object, which win.

    Raises `RequestObjectRefused` when the object does not verify, or names another client_id or
    response_type than `raw`, or itself holds `request` or `request_uri`.
    """
    claims = _verified_claims(raw.get("request") or "", client)
    if "request" in claims or "request_uri" in claims:
        raise RequestObjectRefused("A request object cannot hold request or request_uri.")
    for name in ("client_id", "response_type"):
        if name in claims and raw.get(name) and claims[name] != raw[name]:
            raise RequestObjectRefused(f"The request object's {name} differs from the one sent with it.")
    merged = {name: value for name, value in raw.items() if name != "request"}
    for name, value in claims.items():
        if name in _JWT_MEMBERS:
            continue
        if isinstance(value, str):
            merged[name] = value
        elif name in _JSON_PARAMETERS and isinstance(value, dict):
            merged[name] = json.dumps(value, separators=(",", ":"))
        elif name in _INTEGER_PARAMETERS and isinstance(value, int) and not isinstance(value, bool):
            merged[name] = str(value)
        else:
            raise RequestObjectRefused(f"The request object's {name[:64]} must be a string.")
    return merged
