"""OpenID Connect Back-Channel Logout 1.0: tell each client of a session that it has ended.

Every client that received an id_token in a single sign-on session is remembered with the
session's `sid`. When the session ends, one job per such client with a `backchannel_logout_uri`
is queued with the ending transaction; the worker signs a logout token and POSTs it through the
outbound guard outside any transaction (`CallOutside`), retrying transient failures (network
errors, 5xx, an endpoint slower than `OUTBOUND_DEADLINE`) with backoff.
"""

from __future__ import annotations

import time
import uuid
from functools import partial

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from app.errors import DomainError
from app.extensions import db
from app.jobs.models import Job
from app.jobs.service import CallOutside, enqueue_job
from app.oidc import outbound, subjects, tokens
from app.oidc.client_auth import get_client_by_id
from app.oidc.models import SessionClient
from app.oidc.service import client_alg
from app.tenancy.models import Client

LOGOUT_TASK = "oidc.backchannel_logout"
LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
LOGOUT_TOKEN_TTL = 120


class BackchannelLogoutRefused(DomainError):
    status, code, title = 422, "backchannel_logout_refused", "Back-channel logout not delivered"


class BackchannelLogoutUnavailable(Exception):
    """The client's logout endpoint failed in a way worth retrying."""


def remember_session_client(sid: str, client_id: int, user_id: int) -> None:
    """Record that `client_id` got tokens in session `sid` (idempotent)."""
    insert = postgresql.insert if db.session.get_bind().dialect.name == "postgresql" else sqlite.insert
    db.session.execute(
        insert(SessionClient).values(sid=sid, client_id=client_id, user_id=user_id).on_conflict_do_nothing()
    )


def queue_logouts(sid: str | None) -> int:
    """Queue a back-channel logout job for every client of session `sid` that asked for one."""
    if not sid:
        return 0
    rows = db.session.execute(
        select(SessionClient.client_id, SessionClient.user_id)
        .join(Client, Client.id == SessionClient.client_id)
        .where(SessionClient.sid == sid, Client.backchannel_logout_uri.is_not(None))
    ).all()
    for client_id, user_id in rows:
        enqueue_job(LOGOUT_TASK, {"client_id": client_id, "user_id": user_id, "sid": sid}, client_id=client_id)
    return len(rows)


def logout_token(client: Client, *, user_id: int, sid: str) -> str:
    """A signed logout token (typ `logout+jwt`) for `client`."""
    now = int(time.time())
    claims = {
        "iss": tokens.issuer(),
        "aud": str(client.id),
        "iat": now,
        "exp": now + LOGOUT_TOKEN_TTL,
        "jti": uuid.uuid4().hex,
        "sub": subjects.subject_for(client, user_id),
        "sid": sid,
        "events": {LOGOUT_EVENT: {}},
    }
    return tokens.sign(claims, client_alg(client), "logout+jwt")


def deliver_logout(payload: dict) -> dict | CallOutside:
    """Sign one logout token and have the job runner POST it with no transaction open (runs in the worker).

    The POST raises BackchannelLogoutUnavailable to retry, BackchannelLogoutRefused when retrying
    cannot help; it takes at most `OUTBOUND_DEADLINE` seconds.
    """
    client = get_client_by_id(str(payload["client_id"]))
    if client is None or not client.backchannel_logout_uri:
        return {"skipped": "client gone or no backchannel_logout_uri"}
    token = logout_token(client, user_id=int(payload["user_id"]), sid=str(payload["sid"]))
    return CallOutside(call=partial(post_logout_token, client.backchannel_logout_uri, token), record=_delivered)


def post_logout_token(uri: str, token: str) -> int:
    """POST `token` to `uri`; the status of a successful answer. Must run with no transaction open."""
    try:
        response = outbound.request("POST", uri, data={"logout_token": token})
    except outbound.OutboundRefused as error:
        if error.transient:
            raise BackchannelLogoutUnavailable(str(error)) from None
        raise BackchannelLogoutRefused(str(error)) from None
    if response.status_code >= 500 or response.status_code == 429:
        raise BackchannelLogoutUnavailable(f"{uri} answered HTTP {response.status_code}")
    if response.status_code >= 400:
        raise BackchannelLogoutRefused(f"{uri} answered HTTP {response.status_code}")
    return response.status_code


def _delivered(_job: Job, status: int) -> dict:
    return {"status": status}
