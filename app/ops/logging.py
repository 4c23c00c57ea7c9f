"""JSON logs carrying the request id, in the web process and in workers alike."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


_QUERY_IN_TEXT = re.compile(r"\?([^\s\"'#]+)")
REDACTED = "REDACTED"
access_log = logging.getLogger("tessera.access")


def redact_query(query: str) -> str:
    """`a=1&b=2` -> `a=REDACTED&b=REDACTED`: names stay for debugging, no value (codes, states, tokens)."""
    parts = []
    for pair in query.split("&"):
        name, sep, value = pair.partition("=")
        parts.append(f"{name}={REDACTED}" if sep and value else pair)
    return "&".join(parts)


def redact_urls(text: str) -> str:
    """Every query string inside `text` (a request line, a URL, a log message) with its values redacted."""
    return _QUERY_IN_TEXT.sub(lambda match: "?" + redact_query(match.group(1)), text)


class QueryRedactingFilter(logging.Filter):
    """Rewrites a record's message with query-string values redacted (request logs of servers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "?" in message:
            record.msg, record.args = redact_urls(message), ()
        return True


def logged_access(serve: Callable, environ: dict, start_response: Callable) -> Iterable[bytes]:
    """`serve(environ, start_response)`, then one access line for it, from the thread that served it
    (the hot-route layer calls it around both doors, app/web/hot.py).

    `addr - "METHOD target PROTOCOL" status 1.2ms` on the `tessera.access` logger, labelled with
    the request's id once the application gave it one. `target` is the path, then the query with
    its values redacted: query strings carry authorization codes, states, nonces and id_token
    hints, so no raw query and no header is ever logged. The time runs until the application
    returned its response. (granian's own access log cost about 0.2 ms more CPU per request.)
    """
    started = time.perf_counter()
    request_id_var.set(None)  # the thread's previous request's id must not label this one's lines
    statuses: list[str] = []

    def start(status: str, headers: list, exc_info: Any = None) -> Callable:
        statuses.append(status)
        return start_response(status, headers, exc_info)

    try:
        return serve(environ, start)
    finally:
        path = environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING")
        access_log.info(
            '%s - "%s %s %s" %s %.1fms',
            environ.get("REMOTE_ADDR", "-"),
            environ.get("REQUEST_METHOD", "-"),
            f"{path}?{redact_query(query)}" if query else path,
            environ.get("SERVER_PROTOCOL", "-"),
            statuses[-1].split(" ", 1)[0] if statuses else "500",
            (time.perf_counter() - started) * 1000,
        )


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    return request_id_var.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id and extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id:
            entry["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value if isinstance(value, str | int | float | bool | None) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class RoutineBeatFilter(logging.Filter):
    """Drops beat's INFO line for each task it sends on schedule."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and str(record.msg).startswith("Scheduler: Sending due task"))


def configure_logging(level: str = "INFO") -> None:
    """Route the root logger to stderr as JSON lines (idempotent)."""
    root = logging.getLogger()
    if any(isinstance(handler.formatter, JsonFormatter) for handler in root.handlers):
        root.setLevel(level)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.handlers = [handler]
    root.setLevel(level)
    # Celery's "received" and "succeeded" lines are two INFO records per job (a few percent of a
    # short job's CPU); failures and retries still log at WARNING and above. LOG_LEVEL=DEBUG keeps them.
    quiet = logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING
    for name in ("celery.app.trace", "celery.worker.strategy"):
        logging.getLogger(name).setLevel(quiet)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    # Beat sends the outbox sweep every few seconds; at INFO it says only what changes (start, schedule
    # errors), not "Sending due task" each time.
    if root.level > logging.DEBUG:
        logging.getLogger("celery.beat").addFilter(RoutineBeatFilter())
    # The development server logs every request line, query string included.
    logging.getLogger("werkzeug").addFilter(QueryRedactingFilter())
