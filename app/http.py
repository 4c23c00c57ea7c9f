"""Reusable HTTP pieces: documented problem responses, content-type enforcement, integer and job id
path parameters, the `Location` header, the 202 answer of a write that started a job, the session cookie."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import wraps
from http import HTTPStatus
from inspect import CO_COROUTINE
from types import FunctionType
from typing import Any

from flask import Flask, Request, request, url_for
from flask.json.provider import DefaultJSONProvider
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask_smorest import Blueprint
from webargs import core as webargs_core
from webargs.flaskparser import FlaskParser, is_json_request

import app.json_text as json_text
from app.errors import DomainError, NotFound, ValidationFailed

JSON_MIMETYPES = frozenset({"application/json"})
MAX_ID = 2**31 - 1
LOCATION_HEADER = {"Location": {"description": "URL of the created resource.", "schema": {"type": "string"}}}
# The same header as documented by the routes written before LOCATION_HEADER (kept: the document is stable).
BARE_LOCATION_HEADER = {"Location": {"schema": {"type": "string"}}}
_DIGITS = re.compile(r"^[0-9]{1,10}$")
_JOB_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class TesseraFlask(Flask):
    """Flask, with the check that every hook and view is synchronous made cheap for plain functions.

    Flask passes each request hook, view and error handler through `ensure_sync`, whose
    `inspect.iscoroutinefunction` costs about a microsecond and a half per call, some eighteen times
    a request. A plain function (or a method of one) whose code is not a coroutine and which is not
    marked as one is returned as is, as Flask would; anything else goes to Flask's own check.
    """

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        target = getattr(func, "__func__", func)
        if (
            type(target) is FunctionType
            and not target.__code__.co_flags & CO_COROUTINE
            and "_is_coroutine_marker" not in target.__dict__
        ):
            return func
        return super().ensure_sync(func)


class UnsupportedMediaType(DomainError):
    status, code, title = 415, "unsupported_media_type", "Unsupported media type"


def problem_doc(*statuses: int) -> Callable:
    """Document problem+json responses for `statuses` on a view."""
    responses = {
        str(status): {
            "description": HTTPStatus(status).phrase,
            "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
    return Blueprint.doc(responses=responses)


def accepts(*mimetypes: str) -> Callable:
    """Allow request bodies of these media types on a view (JSON only by default)."""

    def decorator(view: Callable) -> Callable:
        view.accepted_mimetypes = frozenset(mimetypes)  # type: ignore[attr-defined]
        return view

    return decorator


def enforce_content_type(view_functions: dict[str, Callable]) -> None:
    """Refuse a body whose media type the endpoint does not take (415), before parsing it."""
    if request.method not in {"POST", "PUT", "PATCH"} or not request.content_length:
        return
    view = view_functions.get(request.endpoint or "")
    if view is None:
        return
    accepted = _accepted(view)
    mimetype = request.mimetype or ""
    if mimetype in accepted or (mimetype.endswith("+json") and "application/json" in accepted):
        return
    raise UnsupportedMediaType(f"Send the body as {' or '.join(sorted(accepted))}.", accepted=sorted(accepted))


def _accepted(view: Any) -> frozenset[str]:
    while view is not None:
        found = getattr(view, "accepted_mimetypes", None)
        if found is not None:
            return found
        view = getattr(view, "__wrapped__", None)
    return JSON_MIMETYPES


def no_store(view: Callable) -> Callable:
    """Mark a response as never cacheable (tokens, secrets shown once)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from flask import make_response

        response = make_response(view(*args, **kwargs))
        response.headers["Cache-Control"] = "no-store"
        response.headers["Pragma"] = "no-cache"
        return response

    return wrapper


class BoundedJSONProvider(DefaultJSONProvider):
    """Flask's JSON, parsed under `app.json_text`'s rule: the parser's limits (nesting, digits of an
    integer) and unpaired surrogates are invalid JSON (400), never a crash."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return json_text.parse_bounded(lambda: super(BoundedJSONProvider, self).loads(s, **kwargs), s)


class CookieSessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie session, without building its signer for a request that sends no session cookie.

    Most requests (API calls, public reads) carry none: they get the same empty session as before.
    """

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        # No Cookie header at all (most API calls): nothing to parse.
        if app.secret_key and (
            "HTTP_COOKIE" not in request.environ or not request.cookies.get(self.get_cookie_name(app))
        ):
            return self.session_class()
        return super().open_session(app, request)


class BoundedArgumentsParser(FlaskParser):
    """webargs' parser, reading JSON bodies as `parse_json_body` does."""

    def _raw_load_json(self, req: Any) -> Any:
        if not is_json_request(req):
            return webargs_core.missing
        return parse_json_body(req.get_data(cache=True))


# `Blueprint.arguments` binds the parser when a view is decorated, at its module's import; every module
# that declares arguments imports this one first, so the views get this parser whatever imported them
# (a test, a worker, the CLI) and before `create_app` runs.
Blueprint.ARGUMENTS_PARSER = BoundedArgumentsParser()


def parse_json_body(data: bytes) -> Any:
    """A JSON request body as every view reads it (`BoundedArgumentsParser`), also for paths before dispatch.

    UTF-8 only: a byte order mark or a UTF-16/32 body is malformed, as is whatever `app.json_text`
    refuses (the parser's limits, unpaired surrogates); all raise `json.JSONDecodeError`.
    """
    return json_text.parse_bounded(lambda: webargs_core.parse_json(data), data)


def is_loopback_client(remote_addr: str | None) -> bool:
    """Whether a request comes from this machine's loopback interface (127.0.0.0/8, ::1, or IPv4-mapped)."""
    try:
        address = ipaddress.ip_address((remote_addr or "").split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def id_parameter(name: str, description: str) -> dict:
    """OpenAPI description of a positive integer path id (parsed by `path_id`)."""
    return {
        "in": "path",
        "name": name,
        "required": True,
        "description": description,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
    }


def path_id(raw: str, name: str) -> int:
    """A positive integer id from a path segment; 422 naming the parameter otherwise."""
    if not _DIGITS.fullmatch(raw) or not 0 < int(raw) <= MAX_ID:
        raise ValidationFailed(
            f"{name} must be an integer from 1 to {MAX_ID}.",
            errors={name: [f"Must be an integer from 1 to {MAX_ID}."]},
        )
    return int(raw)


def job_id_or_404(job_id: str) -> str:
    """`job_id` if it has the shape every job id has (a lower-case UUID); `NotFound` otherwise.

    Nothing else names a job, so the database is not asked (PostgreSQL cannot even compare a
    text holding NUL).
    """
    if not _JOB_ID.match(job_id):
        raise NotFound("No such job.")
    return job_id


def accepted_job(job: Any, endpoint: str = "jobs.get_job") -> tuple[dict, int, dict]:
    """The one 202 answer of a write that started a job: the job, and where to poll it (`endpoint`
    takes a `job_id`)."""
    return {"data": job}, 202, {"Location": url_for(endpoint, job_id=job.id)}


def accepted_job_location(app: Flask, environ: dict, job_id: str, endpoint: str = "jobs.get_job") -> str:
    """The `Location` of `accepted_job` for a request answered before dispatch (no request context),
    built as `url_for` builds it: by the application's URL adapter for the request."""
    return app.create_url_adapter(app.request_class(environ)).build(endpoint, {"job_id": job_id})
