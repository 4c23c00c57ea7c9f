"""The device authorization grant (RFC 8628): device and user codes, the device page's look-up, the
user's decision and the device's polling. Functions flush but never commit.

A device asks `POST /v1/openidc/device_authorization` for a device code, which it polls the token
endpoint with, and a user code, which the user enters on the device page (`verification_uri`). The
user then signs in and consents on the pages of the code flow (`authorize.start_device_sign_in`),
which approve or deny the device authorization instead of sending a code to a redirect URI; the
token endpoint redeems an approved device code once (`service.device_code_grant`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NoReturn
from urllib.parse import urlencode, urlsplit

from sqlalchemy import or_, select, update

from app.db import as_utc, utcnow
from app.extensions import db
from app.oidc.errors import AccessDenied, AuthorizationPending, ExpiredToken, InvalidGrant, SlowDown
from app.oidc.limits import count_hit, sign_in_network
from app.oidc.models import DEVICE_APPROVED, DEVICE_DENIED, DEVICE_PENDING, DeviceAuthorization
from app.oidc.settings import OidcSettings
from app.security import hash_secret, random_token
from app.settings import current
from app.tenancy.models import Client

# Consonants only (no vowels, so no words; no I/O/1/0 to confuse): 20^8, about 2^34.6 codes, as
# RFC 8628 §6.1 suggests, with guesses limited per network on the device page.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
SLOW_DOWN_SECONDS = 5
DEVICE_PAGE = "/v1/openidc/device"
DEVICE_DONE_PAGE = "/v1/openidc/device/done"
_USER_CODE_WINDOW = 15 * 60
_NEW_USER_CODE_TRIES = 5


@dataclass(frozen=True)
class IssuedDeviceAuthorization:
    """The answer of the device authorization endpoint (RFC 8628 §3.2): the codes exist only here."""

    device_code: str
    user_code: str
    expires_in: int
    interval: int

    def as_dict(self) -> dict:
        uri = verification_uri()
        return {
            "device_code": self.device_code,
            "user_code": self.user_code,
            "verification_uri": uri,
            "verification_uri_complete": f"{uri}?{urlencode({'user_code': self.user_code})}",
            "expires_in": self.expires_in,
            "interval": self.interval,
        }


@dataclass(frozen=True)
class RedeemedDevice:
    """An approved device authorization, consumed: what its tokens say of the sign-in."""

    user_id: int
    scope: str
    auth_time: datetime
    sid: str | None
    amr: str | None
    acr: str | None


class UserCodeRefused(Exception):
    """The device page cannot go on with the code entered; `message` speaks to the person."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _origin() -> str:
    parts = urlsplit(current(OidcSettings).issuer)
    return f"{parts.scheme}://{parts.netloc}"


def verification_uri() -> str:
    """Where the user enters the user code: the device page."""
    return _origin() + DEVICE_PAGE


def done_uri() -> str:
    """Where the device page's sign-in ends, approved or not (the redirect URI of its request)."""
    return _origin() + DEVICE_DONE_PAGE


def format_user_code(code: str) -> str:
    """`BCDFGHJK` as the user reads it: `BCDF-GHJK`."""
    half = USER_CODE_LENGTH // 2
    return f"{code[:half]}-{code[half:]}"


def normalize_user_code(text: str | None) -> str | None:
    """The user code as typed (any case, with dashes or spaces), as stored; None when it cannot be one."""
    code = "".join(character for character in (text or "").upper() if character not in "- \t")
    if len(code) != USER_CODE_LENGTH or any(character not in USER_CODE_ALPHABET for character in code):
        return None
    return code


def _user_code_hash(code: str) -> str:
    return hash_secret("device-user:" + code)


def _device_code_hash(code: str) -> str:
    return hash_secret("device:" + code)


def issue(client: Client, scopes: list[str]) -> IssuedDeviceAuthorization:
    """A new pending device authorization of `client` for `scopes` (already checked). Flushes."""
    settings = current(OidcSettings)
    for _ in range(_NEW_USER_CODE_TRIES):
        user_code = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))
        taken = db.session.execute(
            select(DeviceAuthorization.id).where(DeviceAuthorization.user_code_hash == _user_code_hash(user_code))
        ).first()
        if taken is None:
            break
    else:
        raise RuntimeError("no free user code after several tries: purge expired device authorizations")
    device_code = random_token(32)
    now = utcnow()
    db.session.add(
        DeviceAuthorization(
            device_code_hash=_device_code_hash(device_code),
            user_code_hash=_user_code_hash(user_code),
            client_id=client.id,
            scope=" ".join(scopes),
            status=DEVICE_PENDING,
            created_at=now,
            expires_at=now + timedelta(seconds=settings.device_code_ttl),
            poll_interval=settings.device_poll_interval,
        )
    )
    db.session.flush()
    return IssuedDeviceAuthorization(
        device_code, format_user_code(user_code), settings.device_code_ttl, settings.device_poll_interval
    )


def require_pending(user_code: str | None, remote_addr: str | None) -> DeviceAuthorization:
    """The pending, unexpired device authorization of the user code entered on the device page.

    Every code entered counts, before it is looked up, against `OIDC_DEVICE_USER_CODE_ATTEMPTS` per
    network in 15 minutes (counted in the database: the caller commits the count even when it
    refuses). Raises UserCodeRefused (429 once the attempts are used up).
    """
    network = sign_in_network(remote_addr)
    if count_hit(f"device-user-code:{network}", _USER_CODE_WINDOW) > current(OidcSettings).device_user_code_attempts:
        raise UserCodeRefused("Too many codes were entered from your network. Wait a few minutes and try again.", 429)
    code = normalize_user_code(user_code)
    if code is None:
        raise UserCodeRefused("Enter the code your device shows, like BCDF-GHJK.")
    row = db.session.execute(
        select(DeviceAuthorization).where(DeviceAuthorization.user_code_hash == _user_code_hash(code))
    ).scalar_one_or_none()
    if row is None or row.status != DEVICE_PENDING or as_utc(row.expires_at) <= utcnow():
        raise UserCodeRefused("That code is not right, or it has expired. Check the code on your device.")
    return row


def approve(device_id: int, *, user_id: int, auth_time: datetime, sid: str | None, amr: str, acr: str | None) -> bool:
    """Approve the pending, unexpired device authorization for the signed-in user; False when it no
    longer is (expired, or decided in another browser)."""
    return _decide(device_id, status=DEVICE_APPROVED, user_id=user_id, auth_time=auth_time, sid=sid, amr=amr, acr=acr)


def deny(device_id: int) -> bool:
    """Deny the pending device authorization; False when it no longer is pending."""
    return _decide(device_id, status=DEVICE_DENIED)


def _decide(device_id: int, **values) -> bool:
    decided = db.session.execute(
        update(DeviceAuthorization)
        .where(
            DeviceAuthorization.id == device_id,
            DeviceAuthorization.status == DEVICE_PENDING,
            DeviceAuthorization.expires_at > utcnow(),
        )
        .values(**values)
        .returning(DeviceAuthorization.id)
        .execution_options(synchronize_session=False)
    ).first()
    return decided is not None


def redeem(client_id: int, device_code: str) -> RedeemedDevice:
    """Consume the approved device code of `client_id` (one conditional UPDATE: of concurrent polls
    exactly one wins), or raise why not (RFC 8628 §3.5).

    InvalidGrant (unknown, another client's, already used), ExpiredToken, AccessDenied, and while the
    user has not decided AuthorizationPending, or SlowDown when the device polled before its interval
    was over (the interval then grows by five seconds). The pending answers carry `keep_changes`:
    the time of the poll must stand.
    """
    now = utcnow()
    code_hash = _device_code_hash(device_code)
    consumed = db.session.execute(
        update(DeviceAuthorization)
        .where(
            DeviceAuthorization.device_code_hash == code_hash,
            DeviceAuthorization.client_id == client_id,
            DeviceAuthorization.status == DEVICE_APPROVED,
            DeviceAuthorization.used_at.is_(None),
            DeviceAuthorization.expires_at > now,
        )
        .values(used_at=now)
        .returning(
            DeviceAuthorization.user_id,
            DeviceAuthorization.scope,
            DeviceAuthorization.auth_time,
            DeviceAuthorization.sid,
            DeviceAuthorization.amr,
            DeviceAuthorization.acr,
        )
        .execution_options(synchronize_session=False)
    ).first()
    if consumed is not None:
        user_id, scope, auth_time, sid, amr, acr = consumed
        return RedeemedDevice(user_id, scope, as_utc(auth_time), sid, amr, acr)
    row = db.session.execute(
        select(DeviceAuthorization)
        .where(DeviceAuthorization.device_code_hash == code_hash)
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if row is None or row.client_id != client_id:
        raise InvalidGrant("The device code is unknown or was issued to another client.")
    if row.used_at is not None:
        raise InvalidGrant("The device code was already used.")
    if as_utc(row.expires_at) <= now:
        raise ExpiredToken("The device code has expired; start a new device authorization.")
    if row.status == DEVICE_DENIED:
        raise AccessDenied("The user denied the device authorization.")
    _pace(row, now)


def _pace(row: DeviceAuthorization, now: datetime) -> NoReturn:
    """Record a poll of the pending authorization `row`: AuthorizationPending when it came after the
    interval, else SlowDown with the interval five seconds longer (RFC 8628 §3.5)."""
    on_time = db.session.execute(
        update(DeviceAuthorization)
        .where(
            DeviceAuthorization.id == row.id,
            or_(DeviceAuthorization.next_poll_at.is_(None), DeviceAuthorization.next_poll_at <= now),
        )
        .values(next_poll_at=now + timedelta(seconds=row.poll_interval))
        .returning(DeviceAuthorization.id)
        .execution_options(synchronize_session=False)
    ).first()
    if on_time is not None:
        raise AuthorizationPending("The user has not decided yet.", keep_changes=True)
    interval = row.poll_interval + SLOW_DOWN_SECONDS
    db.session.execute(
        update(DeviceAuthorization)
        .where(DeviceAuthorization.id == row.id)
        .values(poll_interval=interval, next_poll_at=now + timedelta(seconds=interval))
        .execution_options(synchronize_session=False)
    )
    raise SlowDown(f"Polled too fast: wait {interval} seconds between polls.", keep_changes=True)
