"""What every response gets from the application's hooks, for the few answers given before Flask
dispatches (app/agents/public_reads.py, app/oidc/exchange_path.py, app/tenancy/fast_reads.py):
the request id, HSTS and the request metrics, so those answers are indistinguishable from the
views'; and the engine their reads share.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from flask import Flask
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from app.ops.logging import new_request_id, request_id_var

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_READ_ENGINE = "tessera.read_engine"


def read_engine(app: Flask) -> Engine:
    """The engine of reads answered before dispatch, made at the first one.

    One round trip per read on PostgreSQL (no BEGIN, no ROLLBACK), from a pool of its own whose
    connections stay in autocommit: no isolation level set and reset, nor a reset on return, per
    read. It opens at most one connection per thread serving these reads. SQLite keeps the
    isolation its connections are set up with (app/__init__.py), which autocommit would undo.
    """
    engine = app.extensions.get(_READ_ENGINE)
    if engine is None:
        from app.extensions import db

        with app.app_context():
            engine = db.engine
        if engine.dialect.name == "postgresql":
            engine = create_engine(
                engine.url,
                **app.config["SQLALCHEMY_ENGINE_OPTIONS"],
                isolation_level="AUTOCOMMIT",
                pool_reset_on_return=None,
            )
        engine = app.extensions.setdefault(_READ_ENGINE, engine)
    return engine


def request_id_of(environ: dict) -> str:
    """The caller's `X-Request-Id` when well formed, else a new one; logs carry it from here on."""
    supplied = environ.get("HTTP_X_REQUEST_ID", "")
    request_id = supplied if _REQUEST_ID.match(supplied) else new_request_id()
    request_id_var.set(request_id)
    return request_id


def add_response_headers(app: Flask, environ: dict, headers: dict[str, str], request_id: str) -> None:
    """`X-Request-Id` and, on https deployments, `Strict-Transport-Security` (as the after-request hooks)."""
    headers["X-Request-Id"] = request_id
    max_age = app.config["HSTS_MAX_AGE"]
    secure = environ.get("wsgi.url_scheme") == "https"
    if max_age > 0 and (secure or app.config["BASE_URL"].startswith("https://")):
        headers["Strict-Transport-Security"] = f"max-age={max_age}"


class BeforeDispatch:
    """WSGI middleware in front of a Flask application's dispatch: a subclass answers what it can in
    `__call__` (through `respond`) and hands every other request to `inner`, the application."""

    def __init__(self, app: Flask, inner: Callable) -> None:
        self.app = app
        self.inner = inner
        self.metrics = RouteMetrics()

    @classmethod
    def install(cls, app: Flask) -> None:
        """Put this middleware in front of the Flask dispatch of `app`."""
        app.wsgi_app = cls(app, app.wsgi_app)  # type: ignore[method-assign]

    def respond(self, environ: dict, start_response: Callable, *, rule: str, status: int, headers: dict[str, str],
                body: bytes, started: float, request_id: str | None = None) -> Iterable[bytes]:
        """Send an answer with the headers the request hooks add, counted in the request metrics."""
        add_response_headers(self.app, environ, headers, request_id or request_id_of(environ))
        self.metrics.observe(environ["REQUEST_METHOD"], rule, status, started)
        start_response(f"{status} {HTTPStatus(status).phrase}", list(headers.items()))
        return [body]


class RouteMetrics:
    """Request latency and status counts of routes answered before dispatch, labelled as the views'."""

    def __init__(self) -> None:
        # `labels` costs more than the update: the children are looked up once per (method, rule, status).
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, method: str, rule: str, status: int, started: float) -> None:
        from app.ops.metrics import REQUEST_LATENCY, REQUEST_STATUS

        key = (method, rule, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                REQUEST_LATENCY.labels(method, rule),
                REQUEST_STATUS.labels(method, rule, str(status)),
            )
        children[0].observe(time.perf_counter() - started)
        children[1].inc()
