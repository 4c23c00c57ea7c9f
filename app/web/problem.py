"""The one place errors become RFC 9457 problem+json responses (or, for a browser asking for a
missing page, the HTML error page): every error type bound to its response shape."""

from __future__ import annotations

import logging
from http import HTTPStatus
from json import JSONDecodeError
from typing import Any

from flask import Flask, Response, current_app, json, render_template, request
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException

from app.errors import PROBLEM_BASE, PROBLEM_MIMETYPE, Conflict, DomainError, ServiceUnavailable, UnstorableValue
from app.web.pages import page_security_headers

log = logging.getLogger(__name__)


def problem_response(body: dict, status: int, headers: dict | None = None) -> Response:
    response = current_app.response_class(json.dumps(body), status=status, mimetype=PROBLEM_MIMETYPE)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _flatten_webargs_messages(messages: Any) -> dict[str, list[str]]:
    """webargs nests errors by location and field; callers want `{field: [messages]}`."""
    flat: dict[str, list[str]] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), value)
        elif isinstance(node, list) and all(isinstance(item, str) for item in node):
            flat.setdefault(prefix or "_schema", []).extend(node)
        else:
            flat.setdefault(prefix or "_schema", []).append(str(node))

    if isinstance(messages, dict):
        for location_errors in messages.values():
            walk("", location_errors)
    else:
        walk("", messages)
    return flat


def handle_http_exception(error: HTTPException) -> Response:
    status = error.code or 500
    if status == 500:
        return handle_unexpected(error)
    data = getattr(error, "data", None) or {}
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + _http_code(status),
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": error.description or HTTPStatus(status).description,
        "code": _http_code(status),
    }
    headers: dict[str, str] = {}
    if status == 422 and "messages" in data:
        body["code"] = "validation_failed"
        body["type"] = PROBLEM_BASE + "validation_failed"
        body["title"] = "Validation failed"
        body["detail"] = "The request has invalid fields."
        body["errors"] = _flatten_webargs_messages(data["messages"])
    elif status == 400 and "messages" in data:
        cause = getattr(error, "exc", None)
        reason = f": {cause.msg}" if isinstance(cause, JSONDecodeError) else ""
        body["detail"] = f"The request body is not valid JSON{reason}."
        body["code"] = "malformed_json"
        body["type"] = PROBLEM_BASE + "malformed_json"
    if status == 413:
        limit = current_app.config.get("MAX_CONTENT_LENGTH")
        if limit:
            body["detail"] = f"The request body is larger than the limit of {limit} bytes."
            body["limit"] = limit
    if status == 405 and error.valid_methods:  # type: ignore[attr-defined]
        headers["Allow"] = ", ".join(error.valid_methods)  # type: ignore[attr-defined]
    if status == 429:
        body["detail"] = "Too many requests; retry after the time in Retry-After."
        headers["Retry-After"] = rate_limit_retry_after(error)
    for name, value in (data.get("headers") or {}).items():
        headers[name] = value
    if status in _HTML_PAGES and _prefers_html():
        return _html_error_page(status, body["code"], headers)
    return problem_response(body, status, headers)


_HTML_PAGES = {
    404: "There is nothing at this address.",
    405: "This address does not take that kind of request.",
}
_PAGE_HEADERS = page_security_headers(
    "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def _prefers_html() -> bool:
    """A browser (HTML preferred over JSON); on a tie or without Accept, API clients keep problem+json."""
    offered = [PROBLEM_MIMETYPE, "application/json", "text/html"]
    return request.accept_mimetypes.best_match(offered) == "text/html"


def _html_error_page(status: int, code: str, headers: dict[str, str]) -> Response:
    if status == 405:
        detail = f"{request.method} is not allowed on {request.path}; allowed: {headers.get('Allow', 'none')}."
    else:
        detail = f"No page or endpoint answers {request.path}."
    html = render_template(
        "error_page.html",
        title=HTTPStatus(status).phrase,
        message=_HTML_PAGES[status],
        error_code=code,
        error_detail=detail,
    )
    response = current_app.response_class(html, status=status, mimetype="text/html")
    response.headers.update({**headers, **_PAGE_HEADERS})
    return response


def handle_domain_error(error: DomainError) -> Response:
    return problem_response(error.to_problem(), error.status, error.headers)


def handle_database_unavailable(error: DBAPIError | PoolTimeout) -> Response:
    """The database is down, frozen or has no free connection within `DB_POOL_TIMEOUT`: 503."""
    log.warning("database unavailable: %s", error.__class__.__name__)
    from app.db import rollback

    try:
        rollback()
    except Exception:  # the connection is already gone; nothing to roll back
        log.debug("rollback after database failure also failed", exc_info=True)
    return handle_domain_error(ServiceUnavailable("The database is unreachable; try again shortly."))


def handle_unstorable_value(error: DataError) -> Response:
    """A value the database refuses (out of range, NUL in text) is the caller's mistake, not a fault.

    Features validate their inputs; this is the backstop for any value that slipped past them.
    """
    log.warning("database refused a request value: %s", str(error.orig).splitlines()[0] if error.orig else error)
    from app.db import rollback

    rollback()
    return handle_domain_error(
        UnstorableValue("A value in the request is out of range or holds characters that cannot be stored.")
    )


def handle_integrity_error(error: IntegrityError) -> Response:
    """A write that collides with existing data (a race past a service's own check) is a 409."""
    log.warning("integrity error: %s", str(error.orig).splitlines()[0] if error.orig else error)
    from app.db import rollback

    rollback()
    return handle_domain_error(Conflict("The request conflicts with existing data."))


def handle_unexpected(error: Exception) -> Response:
    original = getattr(error, "original_exception", None) or error
    if isinstance(original, DomainError):
        return handle_domain_error(original)
    if isinstance(original, DataError):
        return handle_unstorable_value(original)
    if isinstance(original, IntegrityError):
        return handle_integrity_error(original)
    if isinstance(original, OperationalError | DBAPIError) and _is_disconnect(original):
        return handle_database_unavailable(original)
    if isinstance(original, PoolTimeout):
        return handle_database_unavailable(original)
    log.error("unhandled error on %s %s", request.method, request.path, exc_info=original)
    return problem_response(internal_error_body(), 500)


def internal_error_body() -> dict:
    """The problem+json body of an unexpected fault (a view's or a hot route's, app/web/hot.py)."""
    return {
        "type": PROBLEM_BASE + "internal_error",
        "title": "Internal server error",
        "status": 500,
        "detail": "An unexpected error occurred. It has been logged.",
        "code": "internal_error",
    }


def _is_disconnect(error: DBAPIError) -> bool:
    return bool(getattr(error, "connection_invalidated", False)) or isinstance(error, OperationalError)


def _http_code(status: int) -> str:
    return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")


def register_error_handlers(app: Flask) -> None:
    """Bind every error type to its one response shape."""
    app.register_error_handler(DomainError, handle_domain_error)
    app.register_error_handler(HTTPException, handle_http_exception)
    app.register_error_handler(OperationalError, handle_database_unavailable)
    app.register_error_handler(PoolTimeout, handle_database_unavailable)
    app.register_error_handler(DataError, handle_unstorable_value)
    app.register_error_handler(IntegrityError, handle_integrity_error)
    app.register_error_handler(Exception, handle_unexpected)


def rate_limit_retry_after(error: HTTPException) -> str:
    """Seconds a rate-limited caller should wait: the limiter's header, else the limit's window.

    The limiter's headers are off (they cost storage round trips on every allowed request), so a
    refusal answers the window length, an upper bound of the time until the window resets.
    """
    supplied = error.get_response().headers.get("Retry-After")
    if supplied:
        return supplied
    item = getattr(getattr(error, "limit", None), "limit", None)
    if item is not None:
        return str(item.get_expiry())
    return str(current_app.config.get("RETRY_AFTER_SECONDS", 5))
