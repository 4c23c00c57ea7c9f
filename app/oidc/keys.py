"""Signing keys: generation, encrypted storage, the published key set, rotation and a cache.

Per algorithm (RS256, ES256, EdDSA with Ed25519) there is one `active` key that signs and one `next` key that is
already published, so relying parties have it cached before it signs anything. Rotation retires
the active key, promotes the next one and creates a new next key; a retired key stays published
(and accepted) until every token it signed has expired, then it is deleted.

Which kids are published and in which state is re-read after `OIDC_KEY_CACHE_SECONDS`, so a
rotation in another process is seen within that time (signing meanwhile with the previous key is
safe: it is still published). Verification uses only the published public keys; a private key is
decrypted and kept in memory only while it is the active key of its algorithm, and forgotten at
the first refresh after it stops being active.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from joserfc.jwk import ECKey, OKPKey, RSAKey
from sqlalchemy import delete, or_, select
from sqlalchemy.exc import IntegrityError

from app.cache import Cache
from app.db import as_utc, utcnow
from app.extensions import db
from app.oidc.models import KEY_ACTIVE, KEY_NEXT, KEY_RETIRED, SigningKey
from app.oidc.settings import OidcSettings
from app.security import decrypt, encrypt
from app.settings import current

ALGORITHMS = ("RS256", "ES256", "EdDSA")
_PURPOSE = "oidc-signing-key"
_EXTENSION = "oidc_keys"
# The published set: until OIDC_KEY_CACHE_SECONDS old, and the last one read, however old.
_PUBLISHED, _LAST_READ = "published", "last read"
# Published kids: an active and a next key per algorithm, and retired keys still in their retention.
_VERIFICATION_KEYS = 64
# A kid the cache does not know triggers a reload at most this often (no reload storm from junk).
_MISS_RELOAD_SECONDS = 1.0

SigningJWK = RSAKey | ECKey | OKPKey
_KEY_CLASSES: dict[str, type[SigningJWK]] = {"RS256": RSAKey, "ES256": ECKey, "EdDSA": OKPKey}


@dataclass(frozen=True)
class PublishedKey:
    """A key of the published set: what verification needs to know about it."""

    kid: str
    alg: str
    state: str
    publish_until: datetime | None
    public_jwk: dict


@dataclass(frozen=True)
class _PublishedSet:
    """The published keys by kid, as read from the database at `loaded_at` (`time.monotonic()`)."""

    keys: dict[str, PublishedKey]
    loaded_at: float


class _KeyCaches:
    """This application's key caches (its own: each application has its own database).

    `published` holds the published set for `OIDC_KEY_CACHE_SECONDS` (`_load_published`) and the
    last one read; `signing` the decrypted private keys of active kids (`private_key`) and
    `verifying` the public keys of published kids (`_public_key`). A kid is the RFC 7638 thumbprint
    of its key, so an entry of either never goes stale; a re-read of the set forgets the private
    keys of kids that are no longer active.
    """

    def __init__(self) -> None:
        self.published: Cache[_PublishedSet] = Cache("oidc_published_keys", maxsize=2)
        self.signing: Cache[SigningJWK] = Cache("oidc_signing_keys", maxsize=len(ALGORITHMS))
        self.verifying: Cache[SigningJWK] = Cache("oidc_verification_keys", maxsize=_VERIFICATION_KEYS)


def _caches() -> _KeyCaches:
    caches = current_app.extensions.get(_EXTENSION)
    if caches is None:
        caches = current_app.extensions.setdefault(_EXTENSION, _KeyCaches())
    return caches


def invalidate_key_cache() -> None:
    """Forget which keys are published (call after changing keys in this process)."""
    _caches().published.discard(_PUBLISHED)


def generate_key(alg: str) -> tuple[str, SigningJWK]:
    """A fresh private key for `alg`, with its RFC 7638 thumbprint as kid."""
    if alg == "RS256":
        key: SigningJWK = RSAKey.generate_key(2048, private=True)
    elif alg == "ES256":
        key = ECKey.generate_key("P-256", private=True)
    elif alg == "EdDSA":
        key = OKPKey.generate_key("Ed25519", private=True)
    else:
        raise ValueError(f"unsupported signing algorithm {alg!r}")
    kid = key.thumbprint()
    key = type(key).import_key(key.as_dict(private=True), parameters={"kid": kid, "use": "sig", "alg": alg})
    return kid, key


def _new_row(alg: str, state: str, now: datetime) -> SigningKey:
    kid, key = generate_key(alg)
    return SigningKey(
        kid=kid,
        alg=alg,
        state=state,
        private_key_encrypted=encrypt(key.as_pem(private=True), _PURPOSE),
        public_jwk=key.as_dict(private=False),
        created_at=now,
        activated_at=now if state == KEY_ACTIVE else None,
    )


def _load_published(now: datetime) -> dict[str, PublishedKey]:
    statement = select(
        SigningKey.kid, SigningKey.alg, SigningKey.state, SigningKey.publish_until, SigningKey.public_jwk
    ).where(or_(SigningKey.state.in_((KEY_ACTIVE, KEY_NEXT)), SigningKey.publish_until > now))
    return {
        row.kid: PublishedKey(row.kid, row.alg, row.state, as_utc(row.publish_until), row.public_jwk)
        for row in db.session.execute(statement)
    }


def _published(caches: _KeyCaches, *, force: bool = False) -> _PublishedSet:
    """The published set, re-read once `OIDC_KEY_CACHE_SECONDS` old (or when `force`d)."""
    published = None if force else caches.published.get(_PUBLISHED)
    if published is None:
        published = _PublishedSet(_load_published(utcnow()), time.monotonic())
        for kid, entry in published.keys.items():
            if entry.state != KEY_ACTIVE:
                caches.signing.discard(kid)
        caches.published.put(_PUBLISHED, published, ttl=current(OidcSettings).key_cache_seconds)
        caches.published.put(_LAST_READ, published)
    return published


def signing_keys_loaded() -> bool:
    """Whether this process already knows an active key of every algorithm: signing then only reads.

    Answered from memory (the last set read), never from the database: a caller may be about to
    read in a transaction of its own, whose snapshot must not begin before its statement's.
    """
    last = _caches().published.get(_LAST_READ)
    return last is not None and _active_kids(last).keys() >= set(ALGORITHMS)


def ensure_keys() -> None:
    """Create the active and next key of every algorithm that has none (inside the caller's transaction).

    Safe against a concurrent bootstrap: the partial unique indexes let only one active and one
    next key exist per algorithm; the loser's savepoint is rolled back and it reads the winner's.
    """
    now = utcnow()
    present = {
        (alg, state)
        for alg, state in db.session.execute(
            select(SigningKey.alg, SigningKey.state).where(SigningKey.state.in_((KEY_ACTIVE, KEY_NEXT)))
        )
    }
    for alg in ALGORITHMS:
        for state in (KEY_ACTIVE, KEY_NEXT):
            if (alg, state) in present:
                continue
            try:
                with db.session.begin_nested():
                    db.session.add(_new_row(alg, state, now))
            except IntegrityError:
                pass
    invalidate_key_cache()


def _key_class(alg: str) -> type[SigningJWK]:
    return _KEY_CLASSES[alg]


def private_key(kid: str) -> SigningJWK:
    """The decrypted private key `kid`, whatever its state (not cached; raises LookupError if not stored)."""
    row = db.session.get(SigningKey, kid)
    if row is None:
        raise LookupError(kid)
    pem = decrypt(row.private_key_encrypted, _PURPOSE)
    return _key_class(row.alg).import_key(pem, parameters={"kid": row.kid, "use": "sig", "alg": row.alg})


def _public_key(entry: PublishedKey) -> SigningJWK:
    return _key_class(entry.alg).import_key(entry.public_jwk)


def _active_kids(published: _PublishedSet) -> dict[str, str]:
    """The active kid of each algorithm that has one."""
    return {entry.alg: entry.kid for entry in published.keys.values() if entry.state == KEY_ACTIVE}


def signing_key(alg: str) -> SigningJWK:
    """The private key that signs new tokens with `alg`.

    While an algorithm has no key yet (the first start, or an algorithm added since), the missing
    keys are created in the caller's transaction and deliberately not cached: should that
    transaction roll back, no process may keep using them.
    """
    caches = _caches()
    for attempt in range(2):
        active = _active_kids(_published(caches, force=attempt > 0))
        if active.keys() >= set(ALGORITHMS):
            kid = active[alg]
            return caches.signing.get_or_build(kid, lambda kid=kid: private_key(kid))
    ensure_keys()
    kid = db.session.execute(
        select(SigningKey.kid).where(SigningKey.alg == alg, SigningKey.state == KEY_ACTIVE)
    ).scalar_one()
    return private_key(kid)


def verification_key(kid: str, now: datetime | None = None) -> tuple[PublishedKey, SigningJWK] | None:
    """The published key `kid` and its public key, or None if it is unknown or no longer published."""
    caches = _caches()
    published = _published(caches)
    entry = published.keys.get(kid)
    if entry is None and time.monotonic() - published.loaded_at >= _MISS_RELOAD_SECONDS:
        entry = _published(caches, force=True).keys.get(kid)
    if entry is None:
        return None
    if entry.state == KEY_RETIRED and (entry.publish_until is None or entry.publish_until <= (now or utcnow())):
        return None
    return entry, caches.verifying.get_or_build(kid, lambda: _public_key(entry))


def published_jwks() -> dict:
    """The JWK Set of every key a token may be verified with: next, active and retired-but-live."""
    now = utcnow()
    current_set = _published(_caches())
    published = current_set.keys
    if not _active_kids(current_set).keys() >= set(ALGORITHMS):
        ensure_keys()
        published = _load_published(now)  # uncached until committed, as in `signing_key`
    order = {KEY_ACTIVE: 0, KEY_NEXT: 1, KEY_RETIRED: 2}
    entries = sorted(published.values(), key=lambda entry: (order[entry.state], entry.alg, entry.kid))
    return {
        "keys": [
            dict(entry.public_jwk)
            for entry in entries
            if entry.state != KEY_RETIRED or (entry.publish_until and entry.publish_until > now)
        ]
    }


def retention() -> timedelta:
    """How long a retired key must stay published: the longest token life plus cache and clock slack."""
    config = current(OidcSettings)
    seconds = max(config.access_token_ttl, config.id_token_ttl) + config.key_cache_seconds + config.clock_leeway
    return timedelta(seconds=seconds)


def rotate_keys(algs: tuple[str, ...] = ALGORITHMS) -> list[str]:
    """Retire the active key of each algorithm, promote its next key, create a new next key.

    Runs in the caller's transaction; returns the kids now active.
    """
    now = utcnow()
    activated = []
    for alg in algs:
        rows = (
            db.session.execute(
                select(SigningKey)
                .where(SigningKey.alg == alg, SigningKey.state.in_((KEY_ACTIVE, KEY_NEXT)))
                .with_for_update()
            )
            .scalars()
            .all()
        )
        current = next((row for row in rows if row.state == KEY_ACTIVE), None)
        upcoming = next((row for row in rows if row.state == KEY_NEXT), None)
        if current is not None:
            current.state = KEY_RETIRED
            current.retired_at = now
            current.publish_until = now + retention()
            db.session.flush()
        if upcoming is None:
            upcoming = _new_row(alg, KEY_ACTIVE, now)
            db.session.add(upcoming)
        else:
            upcoming.state = KEY_ACTIVE
            upcoming.activated_at = now
        db.session.flush()
        db.session.add(_new_row(alg, KEY_NEXT, now))
        db.session.flush()
        activated.append(upcoming.kid)
    invalidate_key_cache()
    return activated


def rotate_keys_if_due() -> list[str]:
    """Rotate every algorithm whose active key is older than `OIDC_KEY_ROTATION_INTERVAL`."""
    interval = timedelta(seconds=current(OidcSettings).key_rotation_interval)
    now = utcnow()
    due = []
    for row in db.session.execute(select(SigningKey).where(SigningKey.state == KEY_ACTIVE)).scalars():
        if now - as_utc(row.activated_at or row.created_at) >= interval:
            due.append(row.alg)
    ensure_keys()
    return rotate_keys(tuple(due)) if due else []


def purge_retired_keys() -> int:
    """Delete retired keys that no live token can need any more; returns how many."""
    result = db.session.execute(
        delete(SigningKey).where(SigningKey.state == KEY_RETIRED, SigningKey.publish_until <= utcnow())
    )
    invalidate_key_cache()
    return result.rowcount or 0


def list_keys() -> list[SigningKey]:
    """Every stored key, newest first (for operators)."""
    return list(db.session.execute(select(SigningKey).order_by(SigningKey.created_at.desc())).scalars())
