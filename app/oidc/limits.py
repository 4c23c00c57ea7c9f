"""Counters of the sign-in limits, kept in the database so every process enforces them together.

Used for the limits that must hold in the embedded default too, where the rate limiter's storage
is process memory. Functions flush but never commit.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta

import limits
from sqlalchemy import case
from sqlalchemy.dialects import postgresql, sqlite

from app.db import utcnow
from app.extensions import db
from app.oidc.models import LoginCodeCounter
from app.security import hash_secret


def count_hit(key: str, window_seconds: int) -> int:
    """Count one hit of `key` and return the hits of its window, which opens at the first hit.

    One atomic upsert (the row is locked, or the database serialises writers), so concurrent
    requests in any process never share a count; the key is stored only as a keyed hash (it may
    hold an e-mail or network address).
    """
    now = utcnow()
    ends = now + timedelta(seconds=window_seconds)
    dialect = postgresql if db.session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(LoginCodeCounter).values(
        key_hash=hash_secret(key), window_start=now, hits=1, expires_at=ends
    )
    expired = LoginCodeCounter.expires_at <= now
    statement = statement.on_conflict_do_update(
        index_elements=[LoginCodeCounter.key_hash],
        set_={
            "hits": case((expired, 1), else_=LoginCodeCounter.hits + 1),
            "window_start": case((expired, now), else_=LoginCodeCounter.window_start),
            "expires_at": case((expired, ends), else_=LoginCodeCounter.expires_at),
        },
    ).returning(LoginCodeCounter.hits)
    return db.session.execute(statement).scalar_one()


def sign_in_network(remote_addr: str | None) -> str:
    """The network a sign-in limit counts against: the IPv4 address, or the IPv6 /64 around the address.

    One IPv6 subscriber usually holds a whole /64, so counting single IPv6 addresses would give an
    attacker a fresh limit per address.
    """
    try:
        address = ipaddress.ip_address(remote_addr or "")
    except ValueError:
        return remote_addr or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def network_retry_after(remote_addr: str | None, limit: str) -> int | None:
    """Count a sign-in form submission from this address's network against `limit` ("30 per
    minute", several separated by ";"); the seconds to wait when one is exceeded, else None."""
    network = sign_in_network(remote_addr)
    for item in limits.parse_many(limit):
        window = item.get_expiry()
        if count_hit(f"login-network:{network}:{item.amount}/{window}", window) > item.amount:
            return window
    return None
