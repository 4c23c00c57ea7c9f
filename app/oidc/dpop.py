"""DPoP (RFC 9449): the proofs of possession that bind access tokens to a client's key.

A proof is a JWS typed `dpop+jwt`, signed with an algorithm of `PROOF_ALGORITHMS` by the public
key in its own header. It names its request (`htm`, and `htu` without query and fragment: the
endpoint's public URL, `app.oidc.auth.request_urls`, never one made of the request's `Host`), is fresh
(`iat` within `OIDC_DPOP_PROOF_MAX_AGE`, `OIDC_CLOCK_LEEWAY` ahead), is used once (its `jti` kept by
`app.oidc.replay` while it could pass), carries with `OIDC_DPOP_NONCE` a nonce the server gave in
`DPoP-Nonce`, and at a resource the hash of the access token it comes with (`ath`). A token issued
with a proof carries the key's RFC 7638 thumbprint as `cnf.jkt`.

Nonces need no storage: a nonce is a time slot of `OIDC_DPOP_PROOF_MAX_AGE` seconds and the keyed
hash of it, good in its slot and the next one.

This module checks; callers turn `ProofInvalid` into their endpoint's error shape (RFC 6749 at the
token endpoint, an RFC 9449 §7.1 challenge at resources).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry
from joserfc.jws import JWSRegistry

from app.oidc import replay
from app.oidc.settings import OidcSettings
from app.oidc.tokens import b64_json
from app.security import hash_secret, secret_hash_candidates, texts_equal
from app.settings import current

PROOF_TYPE = "dpop+jwt"
# Asymmetric only (RFC 9449 §4.2): a proof is checked with the public key it carries.
PROOF_ALGORITHMS = ("ES256", "ES384", "PS256", "RS256", "EdDSA")
_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_MAX_PROOF_LENGTH = 8192
_NONCE_PURPOSE = "dpop-nonce:"
_NONCE_MAC_LENGTH = 32


class _ProofRegistry(JWSRegistry):
    """joserfc's JWS checks with room for the header's key (an RSA-4096 key is some 900 characters)."""

    max_header_length = 2048


_PROOF_REGISTRY = _ProofRegistry(algorithms=PROOF_ALGORITHMS)


class ProofInvalid(Exception):
    """The DPoP proof does not hold; the message says why. `use_nonce`: only a current nonce is missing."""

    def __init__(self, reason: str, *, use_nonce: bool = False) -> None:
        super().__init__(reason)
        self.use_nonce = use_nonce


@dataclass(frozen=True, slots=True)
class Proof:
    """A checked proof: the thumbprint of its key (`jkt`), its `jti` and `iat`."""

    jkt: str
    jti: str
    iat: int


def enabled() -> bool:
    """Whether the token endpoint honours proofs (`OIDC_DPOP_ENABLED`); bound tokens stay bound either way."""
    return current(OidcSettings).dpop_enabled


def access_token_hash(access_token: str) -> str:
    """The `ath` of a proof presented with `access_token`: base64url of its SHA-256."""
    digest = hashlib.sha256(access_token.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def current_nonce(now: float | None = None) -> str:
    """The nonce to give in `DPoP-Nonce` now."""
    slot = int((time.time() if now is None else now) // _nonce_period())
    return f"{slot}.{hash_secret(_NONCE_PURPOSE + str(slot))[:_NONCE_MAC_LENGTH]}"


def _nonce_period() -> int:
    return max(1, current(OidcSettings).dpop_proof_max_age)


def _nonce_is_current(nonce: object, now: float) -> bool:
    if not isinstance(nonce, str):
        return False
    slot_text, _, mac = nonce.partition(".")
    if not (slot_text.isascii() and slot_text.isdigit()) or len(slot_text) > 12:
        return False
    slot = int(slot_text)
    if slot not in (int(now // _nonce_period()), int(now // _nonce_period()) - 1):
        return False
    candidates = secret_hash_candidates(_NONCE_PURPOSE + str(slot))
    return any(texts_equal(mac, candidate[:_NONCE_MAC_LENGTH]) for candidate in candidates)


def check_proof(
    presented: list[str],
    *,
    method: str,
    urls: Collection[str],
    access_token: str | None = None,
    now: float | None = None,
) -> Proof:
    """The proof of a request whose `DPoP` headers are `presented`, sent as `method` to one of
    `urls` (the endpoint's URL, without query); with `access_token`, a resource's request, whose
    proof must hash it (`ath`). Raises ProofInvalid. Writes nothing: `remember` records its jti."""
    if len(presented) != 1:
        raise ProofInvalid("Send exactly one DPoP header.")
    raw = presented[0].strip()
    header, claims = _verified(raw)
    moment = time.time() if now is None else now
    _check_claims(claims, method=method, urls=urls, now=moment)
    if access_token is not None and not (
        isinstance(claims.get("ath"), str) and texts_equal(claims["ath"], access_token_hash(access_token))
    ):
        raise ProofInvalid("The DPoP proof's ath is not the hash of the access token.")
    if current(OidcSettings).dpop_nonce and not _nonce_is_current(claims.get("nonce"), moment):
        raise ProofInvalid("The DPoP proof must carry the nonce of the DPoP-Nonce header.", use_nonce=True)
    return Proof(jkt=thumbprint(header["jwk"]), jti=claims["jti"], iat=claims["iat"])


def thumbprint(jwk: dict) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (the `jkt` tokens are bound to)."""
    return JWKRegistry.import_key(jwk).thumbprint()


def _verified(raw: str) -> tuple[dict, dict]:
    parts = raw.split(".")
    if len(raw) > _MAX_PROOF_LENGTH or len(parts) != 3:
        raise ProofInvalid("The DPoP proof is not a signed JWT.")
    try:
        header = b64_json(parts[0])
    except (ValueError, UnicodeError, RecursionError):
        raise ProofInvalid("The DPoP proof's header is malformed.") from None
    if header.get("typ") != PROOF_TYPE:
        raise ProofInvalid(f"The DPoP proof's typ must be {PROOF_TYPE}.")
    alg = header.get("alg")
    if alg not in PROOF_ALGORITHMS:
        raise ProofInvalid(f"The DPoP proof's alg must be one of {', '.join(PROOF_ALGORITHMS)}.")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict) or jwk.get("kty") not in _KEY_TYPES:
        raise ProofInvalid("The DPoP proof's header must carry the public key as jwk.")
    if _PRIVATE_MEMBERS & set(jwk):
        raise ProofInvalid("The DPoP proof's jwk must be a public key.")
    try:
        key = JWKRegistry.import_key(jwk)
        claims = jwt.decode(raw, key, algorithms=[alg], registry=_PROOF_REGISTRY).claims
    except (JoseError, ValueError, TypeError, KeyError):
        raise ProofInvalid("The DPoP proof's signature does not verify with its jwk.") from None
    return header, claims


def _check_claims(claims: dict, *, method: str, urls: Collection[str], now: float) -> None:
    jti, iat = claims.get("jti"), claims.get("iat")
    if not isinstance(jti, str) or not jti or len(jti) > 256:
        raise ProofInvalid("The DPoP proof lacks a jti.")
    if claims.get("htm") != method:
        raise ProofInvalid(f"The DPoP proof's htm must be {method}.")
    if _without_query(claims.get("htu")) not in {_without_query(url) for url in urls}:
        raise ProofInvalid("The DPoP proof's htu is not this endpoint's URL.")
    if not isinstance(iat, int) or isinstance(iat, bool):
        raise ProofInvalid("The DPoP proof lacks iat.")
    settings = current(OidcSettings)
    if iat > now + settings.clock_leeway or iat < now - settings.dpop_proof_max_age - settings.clock_leeway:
        raise ProofInvalid("The DPoP proof's iat is outside the accepted window.")


def _without_query(url: object) -> str | None:
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), query="", fragment="").geturl()


def remember(proof: Proof) -> None:
    """Record the proof's jti for as long as its `iat` could pass; ProofInvalid when it was used
    before. Flushes in the caller's unit of work, never commits."""
    settings = current(OidcSettings)
    until = datetime.fromtimestamp(proof.iat + settings.dpop_proof_max_age + 2 * settings.clock_leeway, UTC)
    if not replay.remember_once(f"dpop:{proof.jkt}:{proof.jti}", until):
        raise ProofInvalid("This DPoP proof was already used.")
