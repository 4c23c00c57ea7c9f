"""Hot routes: the few plain answers given before Flask dispatches, through one layer.

Flask's dispatch, its hooks and flask-smorest cost more than the plain case of a handful of routes
(a public card, a sub-client read, a verification, a code exchange). A feature registers a handler
for such a route in its own routes.py, beside the view:

    @hot.route("GET", r"/v1/sub_client/(?P<subclient_id>[0-9]{1,10})", view="tenancy.get_sub_client")
    def read_sub_client(request: HotRequest) -> HotAnswer | None:
        ...
        return request.hand_off("token unknown")  # the view answers, and says why

A handler answers the plain case (`HotAnswer`) or hands the request to the view (None), which
remains the one definition of every other answer. The layer (`HotLayer`, the one WSGI middleware
`create_app` installs) alone does the rest:

- matches method and path; reads the body once, of the route's media type and under its size cap,
  and puts it back for the view;
- gives the request its id and the answer the security headers and request metrics, with the
  functions the Flask hooks call (app/web/edge.py), under the view's rule;
- the limit gate: no hot answer while a limit applies beyond a route's own (the view's limiter
  then checks every request); a route's own limit is counted by `HotRequest.count_limit`, in the
  view's bucket;
- the fault policy: a hand-off is logged at DEBUG with its reason; a fault the view answers
  itself (a database error, a domain or OAuth error) is logged at INFO and handed to the view; any
  other exception is logged at ERROR with the request id and answered as the application's
  problem+json 500. Nothing escapes the layer.

With `access_log` set (the web server's factory, app/serving.py) the layer writes one access line
per request, whichever door answered (`app.ops.logging.logged_access`). A request whose environ
holds `FORCE_VIEW` skips the handlers (the both-doors test compares the two answers).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http import HTTPStatus
from io import BytesIO

from flask import Flask
from limits import RateLimitItem
from limits import parse as parse_limit
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from app.db import Mode, unit_of_work
from app.errors import PROBLEM_MIMETYPE, DomainError
from app.extensions import limiter
from app.ops.logging import logged_access
from app.web.edge import request_id_of, request_metrics, security_headers
from app.web.problem import internal_error_body

log = logging.getLogger(__name__)

FORCE_VIEW = "tessera.hot.force_view"
_BODILESS = frozenset({204, 304})  # answers without a body have no Content-Length (as werkzeug sends them)
COUNTED = "tessera.hot.limit_counted"
Handler = Callable[["HotRequest"], "HotAnswer | None"]


@dataclass(slots=True)
class HotAnswer:
    """A handler's answer; the layer adds the request id, the security headers and Content-Length."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class HotRequest:
    """What a handler sees of a request: the WSGI environ, the path's named groups, the body read."""

    app: Flask
    environ: dict
    params: dict[str, str]
    body: bytes | None
    request_id: str
    reason: str = ""

    def header(self, name: str, default: str = "") -> str:
        """A request header by its WSGI name (`HTTP_X_API_TOKEN`)."""
        return self.environ.get(name, default)

    def count_limit(self, limit: str, key: str, endpoint: str) -> bool:
        """Count one hit of the view's own `@limiter.limit(limit, key_func=...)` in the view's bucket,
        through Flask-Limiter's public strategy (`limiter.limiter`): `key` is what the view's key
        function returns for this request, `endpoint` the view's endpoint (the limit's scope).

        True when the request may go on (counted, or no limiter enabled) and is marked counted
        (`counted_before_dispatch`, which the view's limit takes as `exempt_when`); False when the
        limit is reached or the storage failed: the view then answers with its 429 or its fallback.
        """
        if not limiter.enabled:
            self.environ[COUNTED] = True
            return True
        item = _parsed_limit(limit)
        prefix = self.app.config.get("RATELIMIT_KEY_PREFIX")  # as Flask-Limiter prefixes its keys
        try:
            allowed = limiter.limiter.hit(item, *([prefix] if prefix else []), key, endpoint)
        except Exception:  # storage down: the view's limiter has the fallback
            log.info("the rate-limit storage failed; the view counts", exc_info=True)
            return False
        if allowed:
            self.environ[COUNTED] = True
        return allowed

    def unit_of_work(self) -> AbstractContextManager[Connection]:
        """The hot route's one unit of work: a connection for one self-contained statement (a read,
        or one write), committed by itself (`Mode.STATEMENT`)."""
        return unit_of_work(Mode.STATEMENT, app=self.app)

    def hand_off(self, reason: str) -> None:
        """Hand the request to the view (returned by the handler), saying why in the debug log."""
        self.reason = reason
        return None


@dataclass(frozen=True, slots=True)
class HotRoute:
    """A registered route: its method, path pattern, view endpoint and what its handler needs."""

    method: str
    pattern: re.Pattern[str]
    prefix: str
    view: str
    handler: Handler
    media_type: str | None
    max_body: int | None
    cookies: bool


def counted_before_dispatch() -> bool:
    """Whether the hot door counted this request in its view's limit (the limit's `exempt_when`)."""
    from flask import request

    return bool(request.environ.get(COUNTED))


@functools.lru_cache(maxsize=64)
def _parsed_limit(limit: str) -> RateLimitItem:
    return parse_limit(limit)


class HotRoutes:
    """The registry of hot routes; features register at import, `create_app` installs the layer."""

    def __init__(self) -> None:
        self.routes: list[HotRoute] = []

    def route(
        self,
        method: str,
        path: str,
        *,
        view: str,
        media_type: str | None = None,
        max_body: int | None = None,
        cookies: bool = True,
    ) -> Callable[[Handler], Handler]:
        """Register `handler` for `method` and the path regex `path` (named groups become `params`),
        answering as the view `view` (an endpoint name) answers.

        `media_type`: the route reads a body of that type (else the view answers), up to `max_body`
        bytes (default `MAX_CONTENT_LENGTH`). `cookies=False`: requests carrying a cookie go to the
        view (which may refresh a session).
        """

        def register(handler: Handler) -> Handler:
            prefix = re.split(r"[(\[\\.*+?{^$|]", path, maxsplit=1)[0]
            self.routes.append(HotRoute(method, re.compile(path), prefix, view, handler, media_type, max_body, cookies))
            return handler

        return register


hot = HotRoutes()


class HotLayer:
    """WSGI middleware in front of Flask's dispatch answering the hot routes (see the module)."""

    def __init__(self, app: Flask, inner: Callable, routes: HotRoutes) -> None:
        self.app = app
        self.inner = inner
        rules = {rule.endpoint: rule.rule for rule in app.url_map.iter_rules()}
        missing = [route.view for route in routes.routes if route.view not in rules]
        if missing:
            raise LookupError(f"hot routes name views that do not exist: {missing}")
        self._routes: dict[str, list[tuple[HotRoute, str]]] = {}
        for route in routes.routes:
            self._routes.setdefault(route.method, []).append((route, rules[route.view]))
        self._metrics = request_metrics(app)
        self.access_log = False

    @classmethod
    def install(cls, app: Flask, routes: HotRoutes = hot) -> None:
        """Put the layer in front of the Flask dispatch of `app` (every view is registered by now)."""
        app.wsgi_app = cls(app, app.wsgi_app, routes)  # type: ignore[method-assign]

    @staticmethod
    def of(app: Flask) -> HotLayer:
        """The layer `install` put in front of `app`'s dispatch (behind ProxyFix, when trusted proxies are set)."""
        layer = app.wsgi_app
        while not isinstance(layer, HotLayer):
            layer = layer.app  # type: ignore[attr-defined]
        return layer

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if self.access_log:
            return logged_access(self._dispatch, environ, start_response)
        return self._dispatch(environ, start_response)

    def _dispatch(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        candidates = self._routes.get(environ.get("REQUEST_METHOD", ""))
        if candidates is None or FORCE_VIEW in environ:
            return self.inner(environ, start_response)
        path = environ.get("PATH_INFO", "")
        for route, rule in candidates:
            if path.startswith(route.prefix):
                match = route.pattern.fullmatch(path)
                if match is not None:
                    return self._serve(route, rule, match.groupdict(), environ, start_response)
        return self.inner(environ, start_response)

    def _serve(
        self, route: HotRoute, rule: str, params: dict[str, str], environ: dict, start_response: Callable
    ) -> Iterable[bytes]:
        started = time.perf_counter()
        request_id = request_id_of(environ)
        if not route.cookies and "HTTP_COOKIE" in environ:
            return self._hand_off(route, "a cookie: the view may refresh a session", environ, start_response)
        if _limits_beyond_routes():
            return self._hand_off(route, "a limit applies beyond the route's own", environ, start_response)
        body = None
        if route.media_type is not None:
            body = read_body(environ, route.media_type, route.max_body or self.app.config["MAX_CONTENT_LENGTH"])
            if body is None:
                return self._hand_off(route, f"no whole {route.media_type} body", environ, start_response)
        request = HotRequest(self.app, environ, params, body, request_id)
        try:
            answer = route.handler(request)
        except (SQLAlchemyError, DomainError) as fault:
            log.info("hot route %s %s handed to the view after %s: %s", route.method, rule, type(fault).__name__, fault)
            return self.inner(environ, start_response)
        except Exception:
            log.exception("hot route %s %s failed", route.method, rule)
            answer = internal_error()
        if answer is None:
            return self._hand_off(route, request.reason or "declined", environ, start_response)
        headers = [
            *answer.headers.items(),
            ("X-Request-Id", request_id),
            *security_headers(self.app, environ.get("wsgi.url_scheme") == "https"),
        ]
        if answer.status not in _BODILESS:
            headers.append(("Content-Length", str(len(answer.body))))
        self._metrics.observe(route.method, rule, answer.status, started)
        start_response(_status_line(answer.status), headers)
        return [answer.body]

    def _hand_off(self, route: HotRoute, reason: str, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("hot route %s %s handed to the view: %s", route.method, environ.get("PATH_INFO"), reason)
        return self.inner(environ, start_response)


def json_answer(app: Flask, status: int, document: object, headers: dict[str, str] | None = None) -> HotAnswer:
    """`document` as the views answer JSON (`app.json.response`: its encoder, compact unless
    debugging, a final newline), with `headers`."""
    provider, compact = json_form(app)[:2]
    text = provider.dumps(document, **({"separators": (",", ":")} if compact else {"indent": 2})) + "\n"
    return HotAnswer(status, text.encode(), {"Content-Type": "application/json", **(headers or {})})


def json_form(app: Flask) -> tuple:
    """What the bytes `json_answer` makes of a document depend on besides the document (a cached
    answer's version; kept beside it): the JSON provider, whether it writes compact, its options."""
    provider = app.json
    compact = provider.compact if provider.compact is not None else not app.debug  # type: ignore[attr-defined]
    return provider, compact, getattr(provider, "sort_keys", None), getattr(provider, "ensure_ascii", None)


def internal_error() -> HotAnswer:
    """The application's problem+json 500 (as `app.web.problem.handle_unexpected` answers it)."""
    return HotAnswer(500, json.dumps(internal_error_body()).encode(), {"Content-Type": PROBLEM_MIMETYPE})


def read_body(environ: dict, media_type: str, max_length: int) -> bytes | None:
    """The whole body of a request of `media_type` and known length up to `max_length`, else None.

    A body read is put back as the request's input, so the view reads the same bytes; anything
    else is left unread.
    """
    sent_type = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
    if sent_type != media_type or environ.get("HTTP_TRANSFER_ENCODING"):
        return None
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
    if not 0 < length <= max_length:
        return None
    body = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = BytesIO(body)
    return body if len(body) == length else None


def _limits_beyond_routes() -> bool:
    return limiter.enabled and limiter.limits_beyond_routes()


def _status_line(status: int) -> str:
    return f"{status} {HTTPStatus(status).phrase}"
