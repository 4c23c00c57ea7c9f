"""Secrets: random tokens, keyed hashes for high-entropy secrets, encryption at rest.

Hashing uses HMAC-SHA256 keyed with `SECRET_HASH_KEY`: API tokens and client secrets carry at
least 256 random bits, so a slow password hash would add latency without adding safety. The
setting lists keys newest first (comma-separated): new hashes use the first, long-lived secrets
(API tokens, client secrets) are still recognised under the older ones, so the key can be rotated.
Encryption uses AES-256-GCM; `ENCRYPTION_KEYS` lists keys newest first, so old ciphertexts stay
readable while new ones use the first key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from flask import current_app

_VERSION = "v1"


def random_token(nbytes: int = 32) -> str:
    """A URL-safe random token with `nbytes` bytes of entropy."""
    return secrets.token_urlsafe(nbytes)


def _hash_keys() -> list[bytes]:
    keys = [key.strip() for key in current_app.config["SECRET_HASH_KEY"].split(",") if key.strip()]
    return [key.encode() for key in keys]


def _keyed_hash(key: bytes, secret: str) -> str:
    return hmac.new(key, secret.encode(), hashlib.sha256).hexdigest()


def hash_secret(secret: str) -> str:
    """Keyed hash of a high-entropy secret under the current key, for storage and lookup."""
    return _keyed_hash(_hash_keys()[0], secret)


def secret_hash_candidates(secret: str) -> list[str]:
    """The hashes of `secret` under every configured key, newest first (to look up by hash)."""
    return [_keyed_hash(key, secret) for key in _hash_keys()]


def texts_equal(supplied: str, expected: str) -> bool:
    """Constant-time comparison of two texts, whatever characters a client sent (compare_digest
    refuses non-ASCII str)."""
    return hmac.compare_digest(supplied.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def verify_secret(secret: str, hashed: str | None) -> bool:
    """Constant-time check of `secret` against a stored hash made under any configured key."""
    if not hashed:
        return False
    return any(hmac.compare_digest(candidate, hashed) for candidate in secret_hash_candidates(secret))


def _derive_key(material: str, purpose: str) -> bytes:
    return hashlib.sha256(f"tessera:{purpose}:".encode() + material.encode()).digest()


def _keys() -> list[str]:
    return [key.strip() for key in current_app.config["ENCRYPTION_KEYS"].split(",") if key.strip()]


def encrypt(plaintext: bytes, purpose: str) -> str:
    """Encrypt `plaintext` for storage; `purpose` binds the ciphertext to its use."""
    material = _keys()[0]
    key_id = hashlib.sha256(material.encode()).hexdigest()[:8]
    nonce = os.urandom(12)
    sealed = AESGCM(_derive_key(material, purpose)).encrypt(nonce, plaintext, purpose.encode())
    return f"{_VERSION}.{key_id}.{base64.urlsafe_b64encode(nonce + sealed).decode()}"


def decrypt(token: str, purpose: str) -> bytes:
    """Decrypt a value made by `encrypt` with any configured key; raises ValueError if it fails."""
    try:
        version, key_id, payload = token.split(".", 2)
        raw = base64.urlsafe_b64decode(payload)
    except (ValueError, TypeError) as exc:
        raise ValueError("not an encrypted value") from exc
    if version != _VERSION:
        raise ValueError("unknown encryption version")
    for material in _keys():
        if hashlib.sha256(material.encode()).hexdigest()[:8] != key_id:
            continue
        return AESGCM(_derive_key(material, purpose)).decrypt(raw[:12], raw[12:], purpose.encode())
    raise ValueError("no configured key can decrypt this value")
