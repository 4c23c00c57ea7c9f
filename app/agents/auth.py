"""Bearer-session authentication of agent network calls."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from flask import g, request
from flask_smorest import Blueprint

from app.agents.accounts import authenticate_session
from app.agents.errors import AuthenticationFailed
from app.agents.models import AgentAccount
from app.http import problem_doc


def agent_session_required(view: Callable | None = None, *, allow_deactivated: bool = False) -> Callable:
    """Require ``Authorization: Bearer <session token>`` from ``/api/auth/verify`` (401 otherwise).

    ``allow_deactivated`` lets the revoked sessions of a deregistered account through, for the
    views that only show it the outcome of its own jobs (its deregistration among them).
    """

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthenticationFailed("Send the session token from /api/auth/verify as a Bearer token.")
            account = authenticate_session(token.strip(), allow_deactivated=allow_deactivated)
            g.agent_account = account
            g.idempotency_scope = f"agent:{account.id}"
            return view(*args, **kwargs)

        return problem_doc(401)(Blueprint.doc(security=[{"BearerToken": []}])(wrapper))

    return decorator(view) if view is not None else decorator


def current_account() -> AgentAccount:
    """The account of the authenticated session (set by ``agent_session_required``)."""
    return g.agent_account
