"""Declarative base, time helpers, and the transaction edge with its outbox.

The transaction rule: a raised error rolls back, a returned response commits. The edge owns the
transaction and commits exactly once; the only callers of `commit` are the edges:

- a request: `_finish_unit_of_work` in `app/__init__.py` (after-request: commits a 2xx/3xx
  response, rolls back a 4xx/5xx one);
- a task or CLI command: `transaction()` below (a `with` block in the `*/tasks.py`, the `*/cli.py`
  commands and the job runner in `app/jobs/service.py`).

Services and routes flush, never commit. Work that must be committed before its edge ends goes
through `commit_before_the_edge(reason)`, the one named exception (`grep commit_before_the_edge`):
an OAuth error with `keep_changes` (a revoked token family), a refused login code (its attempt
counts), the first social fetch a request waits for, rotated OAuth tokens of a deferred fetch, the
job claim, and work done before a call to another host (a spent social link attempt, an API
token's use stamp before a verification). On PostgreSQL the job runner (`app/jobs/service.py`)
spells out its transactions in statements sent in one round trip instead: the claim's BEGIN and
COMMIT travel with the lock that begins the effect's transaction, and a succeeded job's final
state travels with that transaction's COMMIT, so the edge's commit that follows finds nothing
left to send.

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
from functools import wraps
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

# Models import these from here, beside the time helpers they use.
from app.orm import Base as Base
from app.orm import JSONType as JSONType

log = logging.getLogger(__name__)

# SQLSTATE classes and codes of a server that cannot serve right now: connection exceptions,
# too many connections, an administrator's or a crash's shutdown, a server still starting.
_UNAVAILABLE_SQLSTATES = ("08", "53300", "57P01", "57P02", "57P03")
# Set while a `transaction()` block runs, in this thread or task only.
_unit_of_work: ContextVar[bool] = ContextVar("tessera_unit_of_work", default=False)
# Session.info keys: a `read_only` view runs in this session; the session has flushed since its last end.
_READ_ONLY = "tessera_read_only"
_FLUSHED = "tessera_flushed"


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

    db.session.info.pop(_FLUSHED, None)
    db.session.info.pop(_READ_ONLY, None)
    db.session.info.pop("after_commit_batches", None)
    return db.session.info.pop("after_commit", [])


def commit() -> None:
    """Commit the session, then run what was waiting for the commit. For edges only."""
    from app.extensions import db

    try:
        db.session.commit()
    except Exception:
        db.session.rollback()
        _take_after_commit()
        raise
    for callback in _take_after_commit():
        try:
            callback()
        except Exception:  # the outbox sweep recovers anything not published
            log.exception("after-commit callback failed")


def commit_before_the_edge(reason: str) -> None:
    """Commit now, inside a unit of work whose edge would commit later: the one sanctioned exception.

    The rule is that an edge commits once (a returned response or a finished task) and a raised
    error rolls back. Work that must survive a later refusal or be visible to another process
    before the edge ends (a revoked token family answered with an error, a claimed job, a fetch job
    the caller waits for) commits here; `reason` says why, for the reader and the debug log.
    """
    log.debug("commit before the edge: %s", reason)
    commit()


def nothing_to_commit() -> bool:
    """True when a `read_only` view's session holds nothing to commit: no change, flush or callback.

    Consumes the view's mark: the next request in the same session is judged afresh.
    """
    from app.extensions import db

    session = db.session()
    info = session.info
    return bool(
        info.pop(_READ_ONLY, False)
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
def transaction() -> Iterator[None]:
    """One unit of work for tasks and CLI commands: commit on success, roll back on error.

    Every transaction begun inside it counts as one that will write (`in_unit_of_work`): on
    SQLite it takes the write lock at BEGIN, like a request's.
    """
    token = _unit_of_work.set(True)
    try:
        yield
    except BaseException:
        rollback()
        raise
    else:
        commit()
    finally:
        _unit_of_work.reset(token)


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
    """True inside `transaction()` (a task's or a CLI command's unit of work)."""
    return _unit_of_work.get()


def read_only(view: Callable) -> Callable:
    """Run a view that only reads without a transaction: no BEGIN and no COMMIT round trips.

    On PostgreSQL the request's connection is taken in autocommit, so each statement is one round
    trip and sees committed data. Only for views whose every statement reads, apart from single
    self-contained stamps (an API token's last use) that may commit on their own. SQLite keeps
    its transaction (its requests serialise on the write lock either way). When the view changed
    nothing through the session, the request edge releases it without a commit (`nothing_to_commit`).
    """

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from app.extensions import db

        session = db.session()
        session.info[_READ_ONLY] = True
        if db.engine.dialect.name == "postgresql" and not session.in_transaction():
            session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        return view(*args, **kwargs)

    return wrapper
