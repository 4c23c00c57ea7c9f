"""What every response gets from the application's hooks, for the few answers given before Flask
dispatches (app/agents/public_reads.py, app/oidc/exchange_path.py, app/tenancy/fast_reads.py,
app/credentials/fast_verify.py):
the request id, HSTS and the request metrics, so those answers are indistinguishable from the
views'; the engine their statements share, and their statements run by the driver itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from io import BytesIO
from typing import Any

from flask import Flask
from psycopg.rows import namedtuple_row
from sqlalchemy import Executable, Float, create_engine
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import TypeEngine

from app.ops.logging import new_request_id, request_id_var

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_EDGE_ENGINE = "tessera.edge_engine"


def edge_engine(app: Flask) -> Engine:
    """The engine of statements run before dispatch, made at the first one; each statement is a
    unit of work of its own (a read, or the one write of the code exchange).

    One round trip per statement on PostgreSQL (no BEGIN, no COMMIT), from a pool of its own whose
    connections stay in autocommit: no isolation level set and reset, nor a reset on return, per
    statement. It opens at most one connection per thread serving these requests. Its connections
    have the session engine's deadlines (statement timeout, `DB_CALL_TIMEOUT`: app/ops/database.py).
    SQLite keeps the isolation its connections are set up with (app/__init__.py), which autocommit
    would undo.
    """
    engine = app.extensions.get(_EDGE_ENGINE)
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
        engine = app.extensions.setdefault(_EDGE_ENGINE, engine)
    return engine


class DriverStatement:
    """A Core statement that psycopg runs itself on PostgreSQL, compiled once, as a prepared statement.

    On the hottest statements SQLAlchemy's execution context and result objects cost more CPU than
    the statement's round trip; psycopg alone needs none of them, given SQL and parameters that
    need no conversion. Construction refuses statements whose parameters or columns SQLAlchemy
    would convert for PostgreSQL (e.g. JSON parameters), so a row is the same either way, and
    expanding IN lists (use `= any_(array)`). Other dialects run the statement through
    SQLAlchemy as usual. Driver errors surface as SQLAlchemy's `DBAPIError`, and a connection
    the error broke is discarded from the pool.
    """

    def __init__(self, statement: Executable) -> None:
        from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect

        self.statement = statement
        compiled = statement.compile(dialect=psycopg_dialect())
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise TypeError("a DriverStatement takes no expanding or literal-execute parameters")
        dialect = compiled.dialect
        converted = [name for name, bind in compiled.binds.items()
                     if bind.type.dialect_impl(dialect).bind_processor(dialect)]  # fmt: skip
        converted += [column.key for column in statement.exported_columns if _converts_results(column.type, dialect)]
        if converted:
            raise TypeError(f"SQLAlchemy would convert {converted}: not a DriverStatement")
        self._sql = str(compiled)
        # Parameters the statement fixes itself (literals SQLAlchemy binds), beside the caller's.
        self._constants = {name: value for name, value in compiled.params.items() if value is not None}

    def first(self, connection: Connection, parameters: dict[str, Any]) -> Any:
        """The statement's first row, or None: a tuple whose members are named as in SQLAlchemy's row."""
        if connection.dialect.name != "postgresql" or connection.dialect.driver != "psycopg":
            return connection.execute(self.statement, parameters).first()
        with driver_errors(connection, self._sql, parameters) as driver_connection:
            cursor = driver_connection.cursor(row_factory=namedtuple_row)
            return cursor.execute(self._sql, {**self._constants, **parameters}, prepare=True).fetchone()


@contextmanager
def driver_errors(connection: Connection, statement: str, parameters: Any = None) -> Iterator[Any]:
    """The driver's (psycopg's) connection under `connection`; its errors raised as SQLAlchemy's
    `DBAPIError`, as statements run through SQLAlchemy raise them, and a connection an error broke
    discarded from the pool."""
    driver_connection = connection.connection.driver_connection
    dbapi_error = connection.dialect.loaded_dbapi.Error
    try:
        yield driver_connection
    except dbapi_error as error:
        if driver_connection.closed or driver_connection.broken:
            connection.invalidate(error)
        raise DBAPIError.instance(statement, parameters, error, dbapi_error, dialect=connection.dialect) from error


def request_body(environ: dict, media_type: str, max_length: int) -> bytes | None:
    """The whole body of a request of `media_type` and known length up to `max_length`, else None.

    A body read is put back as the request's input, so the application reads the same bytes if
    the request goes on to it; anything else is left unread.
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


def _converts_results(column_type: TypeEngine, dialect: Dialect) -> bool:
    if isinstance(column_type, Float) and not column_type.asdecimal:
        return False  # double precision: psycopg reads a float, as SQLAlchemy would (which needs the column's OID)
    try:
        return column_type.dialect_impl(dialect).result_processor(dialect, None) is not None
    except TypeError:  # a processor chosen by the column's OID (numeric types): not known here
        return True
