"""Refresh tokens: families, rotation on every use, revocation of a family on reuse, lifetimes.

A family starts at a code exchange; each use of its newest token consumes it (one conditional
UPDATE, so of concurrent uses exactly one wins) and adds the next member. Presenting a consumed
token again is a reuse: the whole family and every access token issued from it are revoked (RFC
9700 §4.14.2), unless it comes within `OIDC_REFRESH_REUSE_GRACE` seconds of the rotation (a
client retrying a lost response). Lifetimes per client: absolute (`refresh_token_ttl`, from the
family's start) and idle (`refresh_token_idle_ttl`, from the last rotation); the settings
`OIDC_REFRESH_TOKEN_TTL` / `OIDC_REFRESH_TOKEN_IDLE_TTL` apply when the client sets none.
Functions flush but never commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from app.db import as_utc, utcnow
from app.extensions import db
from app.oidc.models import RefreshToken
from app.oidc.settings import OidcSettings
from app.security import hash_secret, random_token
from app.settings import current
from app.tenancy.models import Client

OFFLINE_ACCESS = "offline_access"


@dataclass(frozen=True)
class ConsumedToken:
    """The refresh token a rotation consumed."""

    family: str
    client_id: int
    user_id: int
    scope: str
    auth_time: datetime
    sid: str | None
    family_expires_at: datetime
    expires_at: datetime
    amr: str | None = None
    acr: str | None = None
    claims: str | None = None


def _hash(raw: str) -> str:
    return hash_secret("refresh:" + raw)


def wanted(client: Client, scope: str) -> bool:
    """Whether a grant of `scope` to `client` comes with a refresh token (`wanted_clause` in SQL)."""
    return OFFLINE_ACCESS in scope.split() or bool(client.issue_refresh_tokens)


def wanted_clause(scope: Any) -> Any:
    """`wanted` as a condition on the outer `Client` and the column or expression `scope` (a
    space-separated scope) of the caller's statement."""
    return or_(
        Client.issue_refresh_tokens.is_(True), (" " + scope + " ").contains(f" {OFFLINE_ACCESS} ", autoescape=True)
    )


def lifetimes(client: Client) -> tuple[int, int]:
    """(absolute, idle) lifetimes in seconds for this client's refresh tokens."""
    config = current(OidcSettings)
    return (
        client.refresh_token_ttl or config.refresh_token_ttl,
        client.refresh_token_idle_ttl or config.refresh_token_idle_ttl,
    )


def add_member(
    client: Client,
    *,
    user_id: int,
    scope: str,
    auth_time: datetime,
    sid: str | None,
    amr: str | None,
    acr: str | None,
    family: str | None,
    family_expires_at: datetime | None,
    access_token_jti: str,
    access_token_expires_at: datetime,
    claims: str | None = None,
) -> tuple[str, str]:
    """Store a new refresh token (a new family when `family` is None); returns (plaintext, family).

    `claims` are the standard claims its request asked for one by one (`RequestedClaims.to_json`)."""
    absolute, idle = lifetimes(client)
    now = utcnow()
    family_end = family_expires_at or now + timedelta(seconds=absolute)
    raw, family = random_token(32), family or random_token(16)
    db.session.add(
        RefreshToken(
            token_hash=_hash(raw),
            family=family,
            client_id=client.id,
            user_id=user_id,
            scope=scope,
            auth_time=auth_time,
            sid=sid,
            amr=amr,
            acr=acr,
            claims=claims,
            created_at=now,
            family_expires_at=family_end,
            expires_at=min(family_end, now + timedelta(seconds=idle)),
            access_token_jti=access_token_jti,
            access_token_expires_at=access_token_expires_at,
        )
    )
    db.session.flush()
    return raw, family


def consume(raw: str) -> ConsumedToken | None:
    """Mark the token used if it is unused and not revoked; None if another use came first or it is unknown.

    Must be the transaction's first write so that concurrent uses serialise on it.
    """
    row = db.session.execute(
        update(RefreshToken)
        .where(RefreshToken.token_hash == _hash(raw), RefreshToken.used_at.is_(None), RefreshToken.revoked_at.is_(None))
        .values(used_at=utcnow())
        .returning(
            RefreshToken.family,
            RefreshToken.client_id,
            RefreshToken.user_id,
            RefreshToken.scope,
            RefreshToken.auth_time,
            RefreshToken.sid,
            RefreshToken.family_expires_at,
            RefreshToken.expires_at,
            RefreshToken.amr,
            RefreshToken.acr,
            RefreshToken.claims,
        )
        .execution_options(synchronize_session=False)
    ).first()
    if row is None:
        return None
    return ConsumedToken(
        row.family,
        row.client_id,
        row.user_id,
        row.scope,
        as_utc(row.auth_time),
        row.sid,
        as_utc(row.family_expires_at),
        as_utc(row.expires_at),
        row.amr,
        row.acr,
        row.claims,
    )


def find(raw: str, client_id: int) -> RefreshToken | None:
    """The stored refresh token `raw` if it was issued to `client_id`."""
    row = db.session.execute(
        select(RefreshToken).where(RefreshToken.token_hash == _hash(raw)).execution_options(populate_existing=True)
    ).scalar_one_or_none()
    return row if row is not None and row.client_id == client_id else None


def within_reuse_grace(row: RefreshToken) -> bool:
    grace = current(OidcSettings).refresh_reuse_grace
    return row.used_at is not None and grace > 0 and (utcnow() - as_utc(row.used_at)).total_seconds() <= grace


def is_active(row: RefreshToken) -> bool:
    now = utcnow()
    return (
        row.used_at is None
        and row.revoked_at is None
        and as_utc(row.expires_at) > now
        and as_utc(row.family_expires_at) > now
    )


def families_of_session(sid: str) -> list[str]:
    """The live families issued under the sign-in session `sid` without `offline_access`: they end
    with the session (offline access outlives it by design)."""
    rows = db.session.execute(
        select(RefreshToken.family, RefreshToken.scope)
        .where(RefreshToken.sid == sid, RefreshToken.revoked_at.is_(None))
        .distinct()
    ).all()
    return sorted({family for family, scope in rows if OFFLINE_ACCESS not in scope.split()})


def revoke_family(family: str) -> list[tuple[str, datetime]]:
    """Revoke every member of the family; returns (jti, expiry) of its access tokens still alive."""
    now = utcnow()
    # Lock the family's rows in one order first: concurrent reuses then queue instead of deadlocking.
    db.session.execute(
        select(RefreshToken.id).where(RefreshToken.family == family).order_by(RefreshToken.id).with_for_update()
    ).all()
    db.session.execute(
        update(RefreshToken)
        .where(RefreshToken.family == family, RefreshToken.revoked_at.is_(None))
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    rows = db.session.execute(
        select(RefreshToken.access_token_jti, RefreshToken.access_token_expires_at).where(
            RefreshToken.family == family, RefreshToken.access_token_jti.is_not(None)
        )
    ).all()
    return [(jti, as_utc(expires)) for jti, expires in rows if as_utc(expires) > now]
