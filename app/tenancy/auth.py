"""`x-api-token` authentication and the `x-api-subclient-id` acting node."""

from __future__ import annotations

import re
from collections.abc import Callable
from copy import deepcopy
from datetime import datetime, timedelta
from functools import wraps
from typing import Any

from flask import g, request
from flask_smorest import Blueprint
from sqlalchemy.engine import Connection

from app.db import utcnow
from app.errors import NotFound, Unauthorized, ValidationFailed
from app.http import problem_doc
from app.tenancy import service
from app.tenancy.caller import Caller
from app.tenancy.models import Client

TOKEN_HEADER = "x-api-token"
SUBCLIENT_HEADER = "x-api-subclient-id"
_LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_CLIENT_ID = 2**31 - 1
_CLIENT_ID = re.compile(r"^[0-9]{1,10}$")


def current_caller() -> Caller:
    """The authenticated caller of this request (set by `api_token_required`)."""
    return g.caller


_SUBCLIENT_PARAMETER = {
    "name": SUBCLIENT_HEADER,
    "in": "header",
    "required": False,
    "description": "Act in this node of the caller's client tree (default: the caller's own client). "
    "A node outside the caller's subtree answers 404.",
    "schema": {"type": "string", "pattern": "^[1-9][0-9]{0,9}$", "maxLength": 10},
}


def api_token_required(view: Callable | None = None, *, subclient: bool = False) -> Callable:
    """Require a valid x-api-token; with `subclient=True` also honour x-api-subclient-id."""

    def decorator(func: Callable) -> Callable:
        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            g.caller = authenticate_request(honour_subclient=subclient)
            return func(*args, **kwargs)

        _merge_parameter_docs(wrapper, [_SUBCLIENT_PARAMETER] if subclient else [])
        # A malformed x-api-subclient-id is a 422 and a node outside the subtree a 404.
        statuses = (401, 404, 422) if subclient else (401,)
        return problem_doc(*statuses)(Blueprint.doc(security=[{"ApiToken": []}])(wrapper))

    return decorator(view) if view is not None else decorator


def _merge_parameter_docs(view: Callable, extra: list[dict]) -> None:
    """Document header parameters alongside the query/path parameters of `@blp.arguments`.

    flask-smorest replaces (not extends) the generated parameter list with a `doc(parameters=...)`
    list, which would hide query parameters; parameters listed with the arguments are merged.
    Parameters documented by inner decorators through `doc` (e.g. Idempotency-Key) move there too.
    """
    apidoc = deepcopy(getattr(view, "_apidoc", {}))
    manual = apidoc.get("manual_doc", {})
    moved = manual.pop("parameters", [])
    if not moved and not extra:
        return
    parameters = apidoc.setdefault("arguments", {}).setdefault("parameters", [])
    parameters.extend([*moved, *extra])
    view._apidoc = apidoc  # type: ignore[attr-defined]


def authenticate_request(*, honour_subclient: bool) -> Caller:
    """Resolve the x-api-token (and, if honoured, x-api-subclient-id) of the current request.

    Raises `Unauthorized` (401) for a missing, unknown, revoked or expired token or a disabled
    client; `ValidationFailed` (422) for a malformed x-api-subclient-id; `NotFound` (404) when
    that node is outside the caller's subtree.
    """
    raw = request.headers.get(TOKEN_HEADER, "")
    if not raw:
        if request.headers.get("Authorization", "").lower().startswith("bearer "):
            raise Unauthorized(
                "This endpoint takes an API token in the x-api-token header, not an Authorization bearer token."
            )
        raise Unauthorized("Send your API token in the x-api-token header.")
    token = service.find_active_token(raw)
    if token is None:
        raise Unauthorized("The API token is unknown, revoked or expired.")
    now = utcnow()
    if token_use_to_stamp(token, now):
        service.stamp_token_use(token.token_id, now)
    node_id = request.headers.get(SUBCLIENT_HEADER, "").strip()
    if honour_subclient and node_id:  # an empty header means the caller's own client
        acting = _acting_node(token.path, node_id)
        return caller_of(token, acting.id, acting.path)
    return caller_of(token)


def unstamped_caller(raw_token: str, connection: Connection) -> Caller | None:
    """The caller of a valid token whose last use needs no stamp, read through `connection` (a
    request answered before dispatch); None otherwise, and the view then authenticates (and stamps)."""
    token = service.find_active_token(raw_token, connection) if raw_token else None
    if token is None or token_use_to_stamp(token, utcnow()):
        return None
    return caller_of(token)


def token_use_to_stamp(token: service.ActiveToken, now: datetime) -> bool:
    """True when the token's last use is to be recorded (at most once a minute: it costs a write)."""
    return token.last_used_at is None or now - token.last_used_at > _LAST_USED_RESOLUTION


def caller_of(token: service.ActiveToken, acting_id: int | None = None, acting_path: str | None = None) -> Caller:
    """The caller a valid token makes, acting in its own client unless another node is given."""
    return Caller(
        client_id=token.client_id,
        token_id=token.token_id,
        is_master=token.parent_id is None,
        root_id=token.root_id or token.client_id,
        path=token.path,
        acting_client_id=token.client_id if acting_id is None else acting_id,
        acting_path=token.path if acting_path is None else acting_path,
    )


def _acting_node(caller_path: str, value: str) -> Client:
    if not _CLIENT_ID.fullmatch(value) or not 0 < int(value) <= MAX_CLIENT_ID:
        raise ValidationFailed(
            f"{SUBCLIENT_HEADER} must be a client id from 1 to {MAX_CLIENT_ID}.",
            errors={SUBCLIENT_HEADER: [f"Must be a client id from 1 to {MAX_CLIENT_ID}."]},
        )
    node = service.get_client_in_subtree(int(value), caller_path)
    if node is None:
        raise NotFound("No such sub-client.")
    return node
