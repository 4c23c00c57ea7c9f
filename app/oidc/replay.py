"""One-time values: the `jti`s of client assertions (RFC 7523), of DPoP proofs (RFC 9449) and of
request objects (RFC 9101).

Each is kept as a keyed hash in `oidc_client_assertions` until it could no longer be accepted
anyway (the authorization side's purge deletes it then). It is written in the request's
transaction: a refused request forgets it, and of two concurrent uses of one value exactly one
records it (the other waits for it on PostgreSQL, or for SQLite's write lock).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.dialects import postgresql, sqlite

from app.extensions import db
from app.oidc.models import ClientAssertion
from app.security import hash_secret


def remember_once(value: str, expires_at: datetime) -> bool:
    """Record `value` (named apart by its caller: `assertion:<client>:<jti>`, `dpop:<jkt>:<jti>`,
    `request_object:<client>:<jti>`) until `expires_at`; False when it is already recorded, a
    replay. Flushes, never commits."""
    insert = postgresql.insert if db.session.get_bind().dialect.name == "postgresql" else sqlite.insert
    recorded = db.session.execute(
        insert(ClientAssertion)
        .values(key=hash_secret(value), expires_at=expires_at)
        .on_conflict_do_nothing()
        .returning(ClientAssertion.key)
    ).first()
    return recorded is not None
