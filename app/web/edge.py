"""What every response gets, whichever door answered it: the request id, the security headers and
the request metrics. The Flask hooks (app/__init__.py, app/ops/metrics.py) and the hot-route layer
(app/web/hot.py) call these same functions, so the two doors cannot drift apart.
"""

from __future__ import annotations

import re
import time
from typing import Any

from flask import Flask, Response, g, request
from prometheus_client import Counter, Histogram

from app.ops.logging import new_request_id, request_id_var

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_REQUEST_ID_KEY = "tessera.request_id"


def request_id_of(environ: dict) -> str:
    """The request's id: the caller's `X-Request-Id` when well formed, else a new one, decided once
    per request (kept in the environ); logs carry it from here on."""
    request_id = environ.get(_REQUEST_ID_KEY)
    if request_id is None:
        supplied = environ.get("HTTP_X_REQUEST_ID", "")
        request_id = environ[_REQUEST_ID_KEY] = supplied if _REQUEST_ID.match(supplied) else new_request_id()
    request_id_var.set(request_id)
    return request_id


def security_headers(app: Flask, secure: bool) -> tuple[tuple[str, str], ...]:
    """`Strict-Transport-Security` on https deployments (`secure`: the request came over https, as
    the trusted proxies say); nothing otherwise."""
    max_age = app.config["HSTS_MAX_AGE"]
    if max_age > 0 and (secure or app.config["BASE_URL"].startswith("https://")):
        return (("Strict-Transport-Security", f"max-age={max_age}"),)
    return ()


REQUEST_LATENCY = Histogram(
    "tessera_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "endpoint"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
REQUEST_STATUS = Counter(
    "tessera_http_responses_total", "HTTP responses by status code", ["method", "endpoint", "status"]
)


class RequestMetrics:
    """Request latency and status counts, labelled by method and route rule (the view's rule)."""

    def __init__(self) -> None:
        # `labels` costs more than the update: the children are looked up once per (method, rule, status).
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, method: str, rule: str | None, status: int, started: float | None) -> None:
        """Count one answer; `rule` None is a request no route matched (not kept: methods are the caller's)."""
        key = (method, rule or "unmatched", status)
        children = self._children.get(key)
        if children is None:
            children = (REQUEST_LATENCY.labels(method, key[1]), REQUEST_STATUS.labels(method, key[1], str(status)))
            if rule is not None:
                self._children[key] = children
        if started is not None:
            children[0].observe(time.perf_counter() - started)
        children[1].inc()


_METRICS = "tessera.request_metrics"


def request_metrics(app: Flask) -> RequestMetrics:
    """The application's request metrics, shared by its hooks and its hot routes."""
    metrics = app.extensions.get(_METRICS)
    if metrics is None:
        metrics = app.extensions.setdefault(_METRICS, RequestMetrics())
    return metrics


def install_edge_hooks(app: Flask) -> None:
    """The Flask door's edge, installed before any other hook: the request id and the clock first,
    and on the final response (also one a later hook refused or replaced) its `X-Request-Id`, the
    security headers and the request metrics, under the view's rule."""
    metrics = request_metrics(app)

    @app.before_request
    def _begin() -> None:
        g.request_started = time.perf_counter()
        g.request_id = request_id_of(request.environ)

    @app.after_request
    def _finish(response: Response) -> Response:
        response.headers["X-Request-Id"] = request_id_of(request.environ)
        # `request.is_secure` trusts X-Forwarded-Proto only from the TRUSTED_PROXIES hops.
        for name, value in security_headers(app, request.is_secure):
            response.headers.setdefault(name, value)
        rule = request.url_rule.rule if request.url_rule else None
        metrics.observe(request.method, rule, response.status_code, g.pop("request_started", None))
        return response
