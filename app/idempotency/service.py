"""`Idempotency-Key`: the same key and body within the TTL replays the first response.

Use `@idempotent` on any POST/PUT view that creates a resource or a job, below the
authentication decorator (the scope is the authenticated caller).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from flask import Response, current_app, g, make_response, request
from flask_smorest import Blueprint
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.db import as_utc, utcnow
from app.errors import Conflict, ValidationFailed
from app.extensions import db
from app.http import problem_doc
from app.idempotency.models import IdempotencyRecord

HEADER = "Idempotency-Key"
_REPLAYED_HEADERS = ("Location", "Content-Type")


class IdempotencyKeyReused(ValidationFailed):
    code, title = "idempotency_key_reused", "Idempotency key reused with a different request"


class IdempotencyKeyInFlight(Conflict):
    code, title = "idempotency_key_in_flight", "A request with this idempotency key is in progress"


def _request_hash() -> str:
    digest = hashlib.sha256()
    digest.update(request.method.encode() + b" " + request.path.encode() + b"\n")
    # The same body sent while acting in another node of the tree is another request.
    caller = g.get("caller")
    if caller is not None:
        digest.update(f"acting:{caller.acting_client_id}\n".encode())
    digest.update(request.get_data(cache=True))
    return digest.hexdigest()


def _scope() -> str:
    scope = g.get("idempotency_scope")
    if scope:
        return scope
    caller = g.get("caller")
    return f"client:{caller.client_id}" if caller is not None else f"anonymous:{request.remote_addr}"


def idempotent(view: Callable) -> Callable:
    """Replay the first 2xx response for a repeated Idempotency-Key with the same request."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = request.headers.get(HEADER)
        if key is None:
            return view(*args, **kwargs)
        if not 1 <= len(key) <= 255:
            raise ValidationFailed(errors={HEADER: ["Must be 1 to 255 characters."]})
        scope, request_hash = _scope(), _request_hash()
        record = db.session.execute(
            select(IdempotencyRecord).where(IdempotencyRecord.scope == scope, IdempotencyRecord.key == key)
        ).scalar_one_or_none()
        ttl = timedelta(seconds=current_app.config["IDEMPOTENCY_TTL_SECONDS"])
        if record is not None and as_utc(record.created_at) + ttl < utcnow():
            db.session.delete(record)
            db.session.flush()
            record = None
        if record is not None:
            if record.request_hash != request_hash:
                raise IdempotencyKeyReused(
                    "This Idempotency-Key was used with a different request in the last 24 hours."
                )
            replay = Response(record.body, status=record.status, mimetype=record.mimetype)
            for name, value in record.headers.items():
                replay.headers[name] = value
            replay.headers["Idempotent-Replayed"] = "true"
            return replay
        response = make_response(view(*args, **kwargs))
        if 200 <= response.status_code < 300:
            db.session.add(
                IdempotencyRecord(
                    scope=scope,
                    key=key,
                    request_hash=request_hash,
                    status=response.status_code,
                    body=response.get_data(as_text=True),
                    mimetype=response.mimetype or "application/json",
                    headers={h: response.headers[h] for h in _REPLAYED_HEADERS if h in response.headers},
                    created_at=utcnow(),
                )
            )
            try:
                db.session.flush()
            except IntegrityError as exc:
                raise IdempotencyKeyInFlight() from exc
        return response

    documented = Blueprint.doc(
        parameters=[
            {
                "name": HEADER,
                "in": "header",
                "required": False,
                "description": "Repeat a request safely: the same key with the same body within 24 h "
                "replays the first response; with a different body the request is refused (422); "
                "while the first request with the key is still running, 409.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255},
            }
        ]
    )(wrapper)
    return problem_doc(409, 422)(documented)
