"""The call deadline of every PostgreSQL connection: a round trip waits at most `DB_CALL_TIMEOUT`.

A frozen server (stopped, its VM paused, its disk stalled) keeps its sockets open and the kernel
acknowledges what is sent: keepalives and `tcp_user_timeout` see a healthy peer, and the server
never enforces its own `statement_timeout`. Only the client can end that wait. Every round trip
of a psycopg connection (a statement, a pipeline's sync, COMMIT, the pool's ROLLBACK) waits in
`Connection.wait`; the connection made here gives that wait a deadline, and at the deadline closes
itself and raises `OperationalError`. SQLAlchemy then sees a disconnect: the connection leaves the
pool, the pool is renewed, a request answers 503 with `Retry-After` and a job retries.

`Connection.wait` and its `timeout` are psycopg's (3.3) own way of bounding a wait, used by its
`notifies()`; this is the one place that relies on them.

The deadline rides in the engine's connect arguments (`CALL_TIMEOUT_ARG`, see
`app.config._engine_options`), so every engine made from the settings has it: the session's and
the statement engine (`app.db.statement_engine`), in web and worker processes alike.

A server that let a round trip or a connection attempt time out is presumed silent: for
`SILENCE_HOLD_SECONDS` this process makes no new connection (each would wait out the connect
timeout), and after that one attempt at a time probes it while the others are refused at once.
Without this, every request of a frozen server's outage would wait for a deadline of its own, and
the few threads serving requests would answer them one deadline after another. A refused
connection (a stopped server) is no silence: it fails at once anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

CALL_TIMEOUT_ARG = "tessera_call_timeout"
# How often a wait wakes up to check its deadline (psycopg's own default interval).
_WAIT_INTERVAL = 0.1
SILENCE_HOLD_SECONDS = 1.0


class CallTimeout(psycopg.OperationalError):
    """The server did not answer a round trip within the call deadline; the connection is closed."""


class ServerSilent(psycopg.OperationalError):
    """No connection attempted: the server has just let a call or a connection time out."""


class _Silence:
    """Whether the server is presumed silent, for every engine of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0  # monotonic time the hold ends; 0 while the server answers
        self._probing = False

    def admit(self) -> bool:
        """Let a connection attempt go ahead (True if it probes a silent server); `ServerSilent` if not."""
        with self._lock:
            if not self._until:
                return False
            if self._probing or time.monotonic() < self._until:
                raise ServerSilent("the database has not answered lately; no connection attempted")
            self._probing = True
            return True

    def heard(self, *, probe: bool) -> None:
        """The server answered, or refused: it is not silent."""
        with self._lock:
            self._until = 0.0
            if probe:
                self._probing = False

    def timed_out(self, *, probe: bool = False) -> None:
        with self._lock:
            self._until = time.monotonic() + SILENCE_HOLD_SECONDS
            if probe:
                self._probing = False


_silence = _Silence()


class DeadlineConnection(psycopg.Connection):
    """A psycopg connection whose every round trip ends within `call_timeout` seconds (None: no limit)."""

    call_timeout: float | None = None

    def wait(self, gen: Any, interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        deadline = self.call_timeout if timeout is None else timeout
        started = time.monotonic()
        try:
            return super().wait(gen, interval, deadline)
        except psycopg.OperationalError as error:
            if timeout is not None or deadline is None or time.monotonic() - started < deadline:
                raise
            # Mid-protocol, the connection can never be used again.
            self.close()
            _silence.timed_out()
            log.warning("the database did not answer within %.1f s; connection dropped", deadline)
            raise CallTimeout(f"the database did not answer within {deadline:g} s") from error


@event.listens_for(Engine, "do_connect")
def _connect_with_deadline(_dialect: Any, _record: Any, cargs: tuple, cparams: dict) -> Any:
    """Connect engines given `CALL_TIMEOUT_ARG` with a `DeadlineConnection`; others as usual."""
    if CALL_TIMEOUT_ARG not in cparams:
        return None
    seconds = float(cparams.pop(CALL_TIMEOUT_ARG))
    probe = _silence.admit()
    try:
        connection = DeadlineConnection.connect(*cargs, **cparams)
    except psycopg.errors.ConnectionTimeout:
        _silence.timed_out(probe=probe)
        raise
    except BaseException:
        _silence.heard(probe=probe)
        raise
    _silence.heard(probe=probe)
    connection.call_timeout = seconds if seconds > 0 else None
    return connection
