"""JWTs the provider issues: RFC 9068 access tokens and OpenID id_tokens; strict verification."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from joserfc import jwt
from joserfc.errors import JoseError, SecurityWarning

from app.oidc import keys
from app.oidc.settings import OidcSettings
from app.security import decrypt, encrypt
from app.settings import current

ACCESS_TOKEN_TYPE = "at+jwt"
CLIENT_SUBJECT_PREFIX = "client:"
# The access-token claim naming the standard claims its request asked for at userinfo (`claims` parameter).
USERINFO_CLAIMS = "userinfo_claims"
# The user of an access token whose subject is pairwise, sealed for this service (the client cannot read it).
USER_REFERENCE_CLAIM = "user_ref"
_USER_REFERENCE_PURPOSE = "access-token-user"
# Verification never trusts the token's own `alg`: only these, and only with a key of that alg.
ALLOWED_ALGORITHMS = frozenset(keys.ALGORITHMS)
# The half of which digest an `at_hash` is (OpenID Core 3.1.3.6): the hash of the alg; EdDSA's
# with Ed25519 is SHA-512 (as oidc-token-hash, the hash of node-oidc-provider, computes it).
_AT_HASH_DIGESTS = {"RS256": "sha256", "ES256": "sha256", "EdDSA": "sha512"}
# joserfc warns at every use that RFC 9864 deprecates "EdDSA" for the fully specified "Ed25519":
# relying parties verify "EdDSA" today, so it is offered knowingly (Ed25519 keys only).
warnings.filterwarnings("ignore", message="EdDSA is deprecated via RFC 9864", category=SecurityWarning)


class TokenInvalid(Exception):
    """The token is not one this provider issued, or no longer valid; the message says why."""


@dataclass(frozen=True)
class AccessTokenClaims:
    """A verified access token."""

    jti: str
    sub: str
    # None in a client_credentials token, whose subject is the client (`client_subject`); from
    # `user_ref` in a token whose subject is pairwise.
    user_id: int | None
    client_id: str
    scopes: tuple[str, ...]
    iat: int
    exp: int
    claims: dict = field(repr=False)

    @property
    def userinfo_claims(self) -> tuple[str, ...]:
        """The standard claims the token's request asked for at userinfo (the `claims` parameter)."""
        names = self.claims.get(USERINFO_CLAIMS)
        return tuple(name for name in names if isinstance(name, str)) if isinstance(names, list) else ()

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def jkt(self) -> str | None:
        """The thumbprint of the DPoP key the token is bound to (`cnf.jkt`, RFC 9449 §6), else None."""
        confirmation = self.claims.get("cnf")
        return confirmation.get("jkt") if isinstance(confirmation, dict) else None


def issuer() -> str:
    return current(OidcSettings).issuer


def at_hash(access_token: str, alg: str) -> str:
    """OpenID `at_hash` of an id_token signed with `alg`: the left half of the token's digest."""
    digest = hashlib.new(_AT_HASH_DIGESTS[alg], access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest[: len(digest) // 2]).rstrip(b"=").decode("ascii")


def sign(claims: dict, alg: str, typ: str) -> str:
    """A JWS of `claims` with the active key of `alg`, typed `typ`."""
    key = keys.signing_key(alg)
    header = {"alg": alg, "kid": key.kid, "typ": typ}
    return jwt.encode(header, claims, key, algorithms=[alg])


def issue_access_token(
    *,
    client_id: int,
    user_id: int,
    scope: str,
    alg: str,
    now: int | None = None,
    jti: str | None = None,
    userinfo_claims: Sequence[str] = (),
    subject: str | None = None,
    jkt: str | None = None,
) -> tuple[str, dict]:
    """Sign an RFC 9068 access token for `user_id` at `client_id`; returns (token, claims).

    `userinfo_claims` (the standard claims the `claims` parameter asked for at userinfo) are named
    in the token only when there are some, so tokens of other requests keep their claims.
    `subject` is the client's `sub` of the user (`subjects.subject_for`, by default the user id).
    When it is not the user id (a pairwise client) the token carries no `user_id`: the user is
    named for this service alone by `user_ref`, the id encrypted, so clients cannot correlate users.
    The token is bound to the DPoP key `jkt` when given (`cnf.jkt`).
    """
    now = int(time.time()) if now is None else now
    sub = subject or str(user_id)
    claims = _access_token_claims(sub, client_id, scope, jti or uuid.uuid4().hex, now, jkt)
    if sub == str(user_id):
        claims["user_id"] = user_id
    else:
        claims[USER_REFERENCE_CLAIM] = encrypt(str(user_id).encode("ascii"), _USER_REFERENCE_PURPOSE)
    if userinfo_claims:
        claims[USERINFO_CLAIMS] = list(userinfo_claims)
    return sign(claims, alg, ACCESS_TOKEN_TYPE), claims


def client_subject(client_id: int | str) -> str:
    """The `sub` of a client's own tokens: `client:<id>`, never equal to a user's decimal id (RFC 9068 §2.2)."""
    return f"{CLIENT_SUBJECT_PREFIX}{client_id}"


def issue_client_access_token(
    *, client_id: int, scope: str, alg: str, jti: str, now: int, jkt: str | None = None
) -> str:
    """Sign an RFC 9068 access token of the client itself (client_credentials): `sub` names the client."""
    claims = _access_token_claims(client_subject(client_id), client_id, scope, jti, now, jkt)
    return sign(claims, alg, ACCESS_TOKEN_TYPE)


def _access_token_claims(sub: str, client_id: int, scope: str, jti: str, now: int, jkt: str | None) -> dict:
    """The RFC 9068 claims every access token carries, for the client `client_id` and subject `sub`,
    and the DPoP key's thumbprint (`cnf.jkt`) of a bound token."""
    claims = {
        "iss": issuer(),
        "sub": sub,
        "aud": str(client_id),
        "client_id": str(client_id),
        "exp": now + current(OidcSettings).access_token_ttl,
        "iat": now,
        "jti": jti,
        "scope": scope,
    }
    if jkt is not None:
        claims["cnf"] = {"jkt": jkt}
    return claims


def issue_id_token(
    *,
    client_id: int,
    user_id: int,
    did: str | None,
    auth_time: int,
    nonce: str | None,
    access_token: str,
    identity: dict | None = None,
    extra_claims: dict,
    alg: str,
    now: int | None = None,
    sid: str | None = None,
    amr: list[str] | None = None,
    acr: str | None = None,
) -> str:
    """Sign an id_token; `extra_claims` (the client's application claims) never override ours.

    `identity` names the user to the client (`subjects.identity_claims`); by default the public
    `sub`, `user_id` and `did`.

    `amr` (RFC 8176 methods) and `acr` say how the user signed in; tokens of sign-ins from before
    they were recorded carry neither."""
    now = int(time.time()) if now is None else now
    claims = dict(extra_claims)
    claims.update(
        {
            "iss": issuer(),
            "aud": str(client_id),
            "exp": now + current(OidcSettings).id_token_ttl,
            "iat": now,
            "auth_time": auth_time,
            "at_hash": at_hash(access_token, alg),
            **(identity or {"sub": str(user_id), "user_id": user_id, "did": did}),
        }
    )
    if nonce:
        claims["nonce"] = nonce
    if sid:
        claims["sid"] = sid
    if amr:
        claims["amr"] = amr
    if acr:
        claims["acr"] = acr
    return sign(claims, alg, "JWT")


def b64_json(segment: str) -> dict:
    padded = segment + "=" * (-len(segment) % 4)
    value = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _verified_claims(raw: str, *, typ: set[str]) -> dict:
    parts = raw.split(".")
    if len(parts) != 3:
        raise TokenInvalid("The token is not a signed JWT.")
    try:
        header = b64_json(parts[0])
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise TokenInvalid("The token header is malformed.") from exc
    alg = header.get("alg")
    if alg not in ALLOWED_ALGORITHMS:
        raise TokenInvalid("The token's signing algorithm is not accepted.")
    if str(header.get("typ", "")).lower() not in typ:
        raise TokenInvalid("The token is not of the expected type.")
    found = keys.verification_key(str(header.get("kid", "")))
    if found is None:
        raise TokenInvalid("The token was signed by an unknown or retired key.")
    published, key = found
    if published.alg != alg:
        raise TokenInvalid("The token's algorithm does not match its key.")
    try:
        token = jwt.decode(raw, key, algorithms=[alg])
    except (JoseError, ValueError) as exc:
        raise TokenInvalid("The token signature is invalid.") from exc
    if token.claims.get("iss") != issuer():
        raise TokenInvalid("The token was issued by someone else.")
    return token.claims


def decode_id_token_hint(raw: str) -> dict | None:
    """Claims of an id_token this provider signed (expired is fine: a logout hint), else None."""
    try:
        return _verified_claims(raw, typ={"jwt", ""})
    except TokenInvalid:
        return None


def decode_access_token(raw: str, *, now: int | None = None) -> AccessTokenClaims:
    """Verify signature, type, issuer, audience and lifetime of an access token (not the deny-list).

    Raises TokenInvalid. The header's `alg` must be allowed *and* match the key found by `kid`, so
    neither `none` nor an HMAC keyed with a public key can pass.
    """
    claims = _verified_claims(raw, typ={ACCESS_TOKEN_TYPE, "application/" + ACCESS_TOKEN_TYPE})
    _check_claims(claims, now=int(time.time()) if now is None else now)
    return AccessTokenClaims(
        jti=claims["jti"],
        sub=claims["sub"],
        user_id=claims["user_id"] if "user_id" in claims else _referenced_user(claims),
        client_id=claims["client_id"],
        scopes=tuple(str(claims.get("scope", "")).split()),
        iat=claims["iat"],
        exp=claims["exp"],
        claims=claims,
    )


def _referenced_user(claims: dict) -> int | None:
    """The user id sealed in `user_ref` (a pairwise subject's token), None without one."""
    if USER_REFERENCE_CLAIM not in claims:
        return None
    try:
        return int(decrypt(str(claims[USER_REFERENCE_CLAIM]), _USER_REFERENCE_PURPOSE).decode("ascii"))
    except (ValueError, UnicodeError):
        raise TokenInvalid("The token's user reference is invalid.") from None


def _check_claims(claims: dict, *, now: int) -> None:
    leeway = current(OidcSettings).clock_leeway
    # A token without user_id or user_ref is the client's own (client_credentials): its subject is the client.
    required = [("exp", int), ("iat", int), ("jti", str), ("sub", str), ("client_id", str)]
    if "user_id" in claims:
        required.append(("user_id", int))
    if USER_REFERENCE_CLAIM in claims:
        required.append((USER_REFERENCE_CLAIM, str))
    for name, kind in required:
        if not isinstance(claims.get(name), kind) or isinstance(claims.get(name), bool):
            raise TokenInvalid(f"The token lacks a valid {name} claim.")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if claims["client_id"] not in audiences:
        raise TokenInvalid("The token's audience is not its client.")
    if "user_id" in claims and USER_REFERENCE_CLAIM in claims:
        raise TokenInvalid("The token names its user twice.")
    # A pairwise subject is not derivable here; the signature vouches for it with the sealed user.
    if USER_REFERENCE_CLAIM not in claims:
        subject = str(claims["user_id"]) if "user_id" in claims else client_subject(claims["client_id"])
        if claims["sub"] != subject:
            raise TokenInvalid("The token's subject is inconsistent.")
    if claims["exp"] <= now - leeway:
        raise TokenInvalid("The token has expired.")
    if claims["iat"] > now + leeway:
        raise TokenInvalid("The token was issued in the future.")
