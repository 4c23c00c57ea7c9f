"""Declarative base, time helpers, and the one owner of transactions: the unit of work and its outbox.

Every edge opens one unit of work, and only this module (with `app.dialect`, which spells out
what differs between the databases) begins, commits or sets an isolation level; a test fails when
anything else does (tests/foundation/test_transaction_owner.py). The modes (`Mode`):

- `WRITE`: one transaction, committed once when the unit ends, rolled back when it raises. A
  task's or a CLI command's `transaction()`, and every request: `_finish_unit_of_work` in
  `app/__init__.py` commits a 2xx/3xx response and rolls back a 4xx/5xx one.
- `READ`: a view that only reads (`read_only`). On PostgreSQL its statements run in autocommit:
  no BEGIN and no COMMIT round trips. It never flushes on its own: a change it makes (an API
  token's use stamp) waits in the session and is written by the edge, in a transaction, only
  when the answer succeeds.
- `STATEMENT`: one self-contained statement (a read, or one write) on a connection of its own,
  outside the session: the hot routes answered before dispatch.
- `JOB`: the job runner. The claim commits as a transaction of its own (`commit_on_its_own`),
  the handler's writes commit with the job's final state (`commit_with`); on PostgreSQL each of
  those travels in one round trip with the statements around it.

Services and routes flush, never commit. Work that must be committed before its edge ends goes
through `commit_before_the_edge(reason)`, the one named exception (`grep commit_before_the_edge`):
an OAuth error with `keep_changes` (a revoked token family), a refused login code (its attempt
counts), the first social fetch a request waits for, rotated OAuth tokens of a deferred fetch, and
work done before a call to another host (a spent social link attempt, an API token's use stamp
before a verification).

No call to another host runs inside a transaction (`app.outbound` asks `transaction_open` first).
A unit of work that must call out either does it before its first write, ending the reads before
it with `end_reads(reason)` (a client's `jwks_uri`, the reCAPTCHA verifier, a verification's
fetches), or, in a job, returns a `CallOutside` so the job runner calls out between two
transactions.

Messages for the broker are queued on the session with `after_commit_publish` and sent only
once that commit has succeeded; a failed commit discards them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from enum import StrEnum
from functools import wraps
from typing import TYPE_CHECKING, Any

from sqlalchemy import Executable, Update, create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from flask import Flask

import app.dialect as dialect

# Models import these from here, beside the time helpers they use.
from app.orm import Base as Base
from app.orm import JSONType as JSONType

log = logging.getLogger(__name__)

# SQLSTATE classes and codes of a server that cannot serve right now: connection exceptions,
# too many connections, an administrator's or a crash's shutdown, a server still starting.
_UNAVAILABLE_SQLSTATES = ("08", "53300", "57P01", "57P02", "57P03")


class Mode(StrEnum):
    """How a unit of work uses the database (see the module's docstring)."""

    WRITE = "write"
    READ = "read"
    STATEMENT = "statement"
    JOB = "job"


# The mode of the unit of work a task, CLI command or job opened, in this thread or task only.
_unit_of_work: ContextVar[Mode | None] = ContextVar("tessera_unit_of_work", default=None)
# Session.info keys: a `read_only` view runs in this session; the session has flushed since its
# last end; the edge is writing what a `read_only` view changed.
_READ_ONLY = "tessera_read_only"
_FLUSHED = "tessera_flushed"
_EDGE_WRITES = "tessera_edge_writes"
_AUTOCOMMIT = {"isolation_level": "AUTOCOMMIT"}
_STATEMENT_ENGINE = "tessera.statement_engine"
# Session.info key: the writes of a `JOB` unit sent with its commit (`write_with_commit`).
_WITH_COMMIT = "tessera_with_commit"


@event.listens_for(Session, "before_flush")
def _refuse_read_flush(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(_READ_ONLY) and not session.info.get(_EDGE_WRITES):
        raise RuntimeError("a read unit of work flushed: its changes are written by its edge, never on their own")


@event.listens_for(Session, "after_flush")
def _note_flush(session: Session, _context: Any) -> None:
    session.info[_FLUSHED] = True


def database_unreachable(error: BaseException) -> bool:
    """True when `error` says the database could not be reached or did not answer in time.

    An outage, not a refusal of the statement: the connection failed, broke or timed out
    (`DB_CALL_TIMEOUT`), the server is shutting down or full, no pooled connection came free, or
    SQLite's write lock stayed taken. A statement the server refused or cancelled (its own
    `statement_timeout`, a deadlock) is not one.
    """
    if isinstance(error, PoolTimeout):
        return True
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    import sqlite3

    import psycopg

    original = error.orig
    if isinstance(original, psycopg.Error):
        if original.sqlstate is None:  # raised by the client: no connection, or the deadline passed
            return isinstance(original, psycopg.OperationalError)
        return original.sqlstate.startswith(_UNAVAILABLE_SQLSTATES)
    if isinstance(original, sqlite3.OperationalError):
        return "locked" in str(original) or "busy" in str(original)
    return False


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """Treat a naive datetime read back from SQLite as UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def isoformat(value: datetime | None) -> str | None:
    """ISO 8601 UTC with `Z`, as every API response writes times."""
    value = as_utc(value)
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def after_commit_publish(callback: Callable[[], None]) -> None:
    """Run `callback` once the current transaction has committed (never if it rolls back)."""
    from app.extensions import db

    db.session.info.setdefault("after_commit", []).append(callback)


def after_commit_batch(key: str, item: Any, callback: Callable[[list], None]) -> None:
    """Collect `item` under `key`; once the transaction commits, `callback` gets them all in one list."""
    from app.extensions import db

    batches = db.session.info.setdefault("after_commit_batches", {})
    if key not in batches:
        items = batches[key] = []
        after_commit_publish(lambda: callback(items))
    batches[key].append(item)


def _take_after_commit() -> list[Callable[[], None]]:
    from app.extensions import db

    session = db.session()
    session.info.pop(_FLUSHED, None)
    if session.info.pop(_READ_ONLY, None):
        session.autoflush = True
    session.info.pop("after_commit_batches", None)
    session.info.pop(_WITH_COMMIT, None)
    return session.info.pop("after_commit", [])


def commit() -> None:
    """Commit the session, then run what was waiting for the commit. For edges only.

    What a `read_only` view changed is written here, in a transaction of its own.
    """
    from app.extensions import db

    session = db.session()
    try:
        if session.info.get(_READ_ONLY) and (session.new or session.dirty or session.deleted):
            _begin_edge_writes(session)
        for statement, parameters in session.info.pop(_WITH_COMMIT, ()):
            session.execute(statement, parameters)
        session.commit()
    except Exception:
        session.rollback()
        _take_after_commit()
        raise
    finally:
        session.info.pop(_EDGE_WRITES, None)
    for callback in _take_after_commit():
        try:
            callback()
        except Exception:  # the outbox sweep recovers anything not published
            log.exception("after-commit callback failed")


def _begin_edge_writes(session: Session) -> None:
    """Let the edge flush a `read_only` view's changes, in one transaction even in autocommit."""
    session.info[_EDGE_WRITES] = True
    connection = session.connection()
    if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        # The connection stays in autocommit; the server's transaction spans the flush, and the
        # session's commit sends its COMMIT (the driver sees the transaction open).
        connection.exec_driver_sql("BEGIN")


def commit_before_the_edge(reason: str) -> None:
    """Commit now, inside a unit of work whose edge would commit later: the one sanctioned exception.

    The rule is that an edge commits once (a returned response or a finished task) and a raised
    error rolls back. Work that must survive a later refusal or be visible to another process
    before the edge ends (a revoked token family answered with an error, a fetch job the caller
    waits for) commits here; `reason` says why, for the reader and the debug log.
    """
    log.debug("commit before the edge: %s", reason)
    commit()


def nothing_to_commit() -> bool:
    """True when a `read_only` view's session holds nothing to commit: no change, flush or callback."""
    from app.extensions import db

    session = db.session()
    info = session.info
    return bool(
        info.get(_READ_ONLY, False)
        and _FLUSHED not in info
        and "after_commit" not in info
        and not (session.new or session.dirty or session.deleted)
    )


def release() -> None:
    """End the session's transaction without a commit (it holds nothing to commit). For edges only.

    Its connection goes back to the pool, which rolls back: on SQLite that ends the write lock a
    request's BEGIN IMMEDIATE took; a commit would persist nothing and costs a commit's work.
    """
    from app.extensions import db

    db.session.close()
    _take_after_commit()


def rollback() -> None:
    """Roll back the session and forget what was waiting for a commit."""
    from app.extensions import db

    db.session.rollback()
    _take_after_commit()


@contextmanager
def unit_of_work(mode: Mode = Mode.WRITE, app: Flask | None = None) -> Iterator[Connection | None]:
    """The unit of work of an edge that is not a request: a task, a CLI command, a job, a hot route.

    `WRITE`, `JOB`: the session's transaction, committed (then the after-commit callbacks run)
    when the block ends, rolled back when it raises. `READ`: the session's reads, in autocommit on
    PostgreSQL; its changes are written when the block ends. `STATEMENT`: yields a connection of
    its own for one statement (on PostgreSQL in autocommit, from a pool that stays so; elsewhere
    committed when the block ends), leaving the session alone. Every transaction begun inside a
    unit counts as one that may write: on SQLite it takes the write lock at BEGIN, like a request's.
    Opened once per edge: a unit opened inside another raises `RuntimeError`. `app` (a `STATEMENT`
    unit only, which needs no application context: a hot route's) defaults to the current one.
    """
    if _unit_of_work.get() is not None:
        raise RuntimeError(f"a {mode} unit of work opened inside a {_unit_of_work.get()} one")
    if mode is Mode.STATEMENT:
        with _statement_unit(app) as connection:
            yield connection
        return
    token = _unit_of_work.set(mode)
    try:
        if mode is Mode.READ:
            _begin_reads()
        yield None
    except BaseException:
        _unit_of_work.reset(token)
        rollback()
        raise
    _unit_of_work.reset(token)
    if mode is Mode.READ and nothing_to_commit():
        release()
    else:
        commit()


def transaction() -> Any:
    """`unit_of_work(Mode.WRITE)`: the unit of work of a task or a CLI command."""
    return unit_of_work(Mode.WRITE)


@contextmanager
def _statement_unit(app: Flask | None) -> Iterator[Connection]:
    token = _unit_of_work.set(Mode.STATEMENT)
    try:
        with statement_engine(app).connect() as connection:
            yield connection
            if connection.in_transaction():
                connection.commit()
    finally:
        _unit_of_work.reset(token)


def statement_engine(app: Flask | None = None) -> Engine:
    """The engine of `STATEMENT` units (a hot route's, app/web/hot.py), made at the first one.

    On PostgreSQL a pool of its own whose connections stay in autocommit: one round trip per
    statement, and no isolation level set and reset per statement. It has the session engine's
    options (deadlines: app/ops/database.py). SQLite shares the session's engine (its connections
    are set up for its transactions, which autocommit would undo). `app` defaults to the current one.
    """
    from flask import current_app

    from app.extensions import db

    app = app or current_app._get_current_object()
    engine = app.extensions.get(_STATEMENT_ENGINE)
    if engine is None:
        with app.app_context():
            engine = db.engine
        if engine.dialect.name == "postgresql":
            engine = create_engine(
                engine.url,
                **app.config["SQLALCHEMY_ENGINE_OPTIONS"],
                isolation_level="AUTOCOMMIT",
                pool_reset_on_return=None,
            )
        engine = app.extensions.setdefault(_STATEMENT_ENGINE, engine)
    return engine


def _begin_reads() -> None:
    """Mark the session's unit as `READ`: autocommit on PostgreSQL, no flush before the edge."""
    from app.extensions import db

    session = db.session()
    session.info[_READ_ONLY] = True
    session.autoflush = False
    if db.engine.dialect.name == "postgresql" and not session.in_transaction():
        session.connection(execution_options=_AUTOCOMMIT)


def writes_at_begin() -> bool:
    """True when a transaction begun now belongs to a unit of work that may write (SQLite's BEGIN IMMEDIATE)."""
    from flask import has_request_context

    return has_request_context() or _unit_of_work.get() not in (None, Mode.STATEMENT)


def commit_on_its_own(statement: Update, parameters: dict[str, Any], *, then: Executable | None = None) -> tuple:
    """In a `JOB` unit, as its first statement: commit `statement` in a transaction of its own, whose
    commit may be acknowledged before it reaches the disk (`dialect.relaxed_durability`); then,
    with `then`, begin the unit's transaction with that statement.

    Returns `(rows statement changed, then's first row as a tuple or None)`. On PostgreSQL one
    round trip: the session's connection is taken in autocommit and the steps say where each
    transaction begins and ends; the unit's commit or rollback ends the second one as usual.
    """
    from app.extensions import db

    _require_mode(Mode.JOB)
    session = db.session()
    if dialect.pipelines(db.engine):
        connection = session.connection(execution_options=_AUTOCOMMIT)
        relaxed = dialect.relaxed_durability(connection, statement)
        steps: list[dialect.Step] = [dialect.BEGIN, (relaxed, parameters), dialect.COMMIT]
        if then is not None:
            steps += [dialect.BEGIN, (then, parameters)]
        results = dialect.driver_pipeline(connection, steps)
        return results[1][0], results[-1][1] if then is not None else None
    changed = session.execute(statement, parameters).rowcount
    commit()
    row = session.execute(then, parameters).first() if then is not None else None
    return changed, None if row is None else tuple(row)


def commit_with(statement: Executable, parameters: dict[str, Any]) -> None:
    """In a `JOB` unit, as its last write: flush, then run the `write_with_commit` writes and
    `statement`, and commit the transaction.

    On PostgreSQL the statement travels with the COMMIT, one round trip; the unit's own commit
    then finds the transaction ended and sends nothing, and runs the after-commit callbacks.
    Elsewhere the statement runs now and the unit commits when it ends.
    """
    from app.extensions import db

    _require_mode(Mode.JOB)
    session = db.session()
    if dialect.pipelines(db.engine):
        session.flush()
        writes: list[dialect.Step] = session.info.pop(_WITH_COMMIT, [])
        dialect.driver_pipeline(session.connection(), [*writes, (statement, parameters), dialect.COMMIT])
        return
    session.execute(statement, parameters)


def write_with_commit(statement: Executable, parameters: dict[str, Any]) -> None:
    """In a `JOB` unit: a write that nothing in the unit reads back, sent when the unit commits.

    On PostgreSQL it travels in `commit_with`'s round trip (with the job's final state and the
    COMMIT), run by the driver as `commit_with`'s statement is: give every column's value, defaults
    included. Elsewhere it runs now. A unit that ends without `commit_with` runs it before its
    commit; a rollback discards it with the rest.
    """
    from app.extensions import db

    _require_mode(Mode.JOB)
    session = db.session()
    if dialect.pipelines(db.engine):
        session.info.setdefault(_WITH_COMMIT, []).append((statement, parameters))
        return
    session.execute(statement, parameters)


def _require_mode(mode: Mode) -> None:
    if _unit_of_work.get() is not mode:
        raise RuntimeError(f"only a {mode} unit of work may do this (this is {_unit_of_work.get()})")


def configure_engine(engine: Engine) -> None:
    """Set up a new engine for the unit of work: on SQLite, its BEGIN (`dialect.configure_sqlite`)."""
    if engine.dialect.name == "sqlite":
        dialect.configure_sqlite(engine, writes_at_begin)


def transaction_open() -> bool:
    """True when the current application context's session has a database transaction open.

    The outbound client asks it before every call to another host (`app.outbound`).
    """
    from flask import has_app_context

    from app.extensions import db

    return has_app_context() and db.session().in_transaction()


def end_reads(reason: str) -> None:
    """End the session's transaction before a call to another host; it must hold nothing to commit.

    Only reads may precede it: what they loaded is expired and read again when next used, in a new
    transaction. Raises `RuntimeError` when the transaction holds changes (they would be lost).
    """
    from app.extensions import db

    session = db.session()
    if session.new or session.dirty or session.deleted or _FLUSHED in session.info or "after_commit" in session.info:
        raise RuntimeError(f"cannot end a transaction that holds changes ({reason})")
    log.debug("end reads before the edge: %s", reason)
    session.rollback()


def in_unit_of_work() -> bool:
    """True inside a `unit_of_work()` block (a task's, a CLI command's, a job's or a hot route's)."""
    return _unit_of_work.get() is not None


def read_only(view: Callable) -> Callable:
    """Run a view as a `READ` unit of work: no BEGIN and no COMMIT round trips on PostgreSQL.

    The request's connection is taken in autocommit, so each statement is one round trip and sees
    committed data; SQLite keeps its transaction (its requests serialise on the write lock either
    way). A change the view makes (an API token's use stamp) is never flushed on its own: the
    request's edge writes it, in a transaction, when the answer succeeds, and releases the session
    without a commit when there is none (`nothing_to_commit`).
    """

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _begin_reads()
        return view(*args, **kwargs)

    return wrapper
