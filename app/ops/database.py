"""The deadlines of every PostgreSQL connection: a frozen server is found within `DB_FREEZE_SECONDS`, and a
round trip waits at most `DB_CALL_TIMEOUT`.

A frozen server (stopped, its VM paused, its disk stalled) keeps its sockets open and the kernel
acknowledges what is sent: keepalives and `tcp_user_timeout` see a healthy peer, and the server
never enforces its own `statement_timeout`. Only the client can end that wait. Every round trip
of a psycopg connection (a statement, a pipeline's sync, COMMIT, the pool's ROLLBACK) waits in
`Connection.wait`; the connection made here watches that wait, and when it gives up, closes
itself and raises `OperationalError`. SQLAlchemy then sees a disconnect: the connection leaves the
pool, the pool is renewed, a request answers 503 with `Retry-After` and a job retries.

A slow statement and a frozen server look alike from the waiting call, so the call asks the
server. Once it has waited half of `DB_FREEZE_SECONDS` while no call of this process to that
server got an answer, it opens a new connection to it (one call at a time does): a server that
completes the handshake within the other half is alive, and the call waits on, up to
`DB_CALL_TIMEOUT` (above the server's statement timeout). One that does not is frozen: every call
waiting on it fails at its next idle tick, and so does every round trip of the next
`SILENCE_HOLD_SECONDS` (a tenth of a second after it is sent), while connection attempts are refused
at once; after that one attempt at a time probes it (within half of `DB_FREEZE_SECONDS`) while the
others are refused at once. Without this, each request of a frozen server's outage would wait for a deadline of its own,
and the requests queued for the few threads serving them would wait for those deadlines one after
another. A refused connection (a stopped server) is no silence: it fails at once anyway.

`Connection.wait` and its `timeout`, the idle ticks it sends a waiting generator (`READY_NONE`
every `_WAIT_INTERVAL`), `psycopg.generators.connect` and `psycopg.waiting.wait_conn` are psycopg's
(3.3) own; this is the one place that relies on them.

The deadlines ride in the engine's connect arguments (`CALL_TIMEOUT_ARG`, `FREEZE_ARG`, see
`app.config._engine_options`), so every engine made from the settings has them: the session's and
the statement engine (`app.db.statement_engine`), in web and worker processes alike.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator
from typing import Any

import psycopg
from psycopg import generators, waiting
from psycopg.conninfo import make_conninfo
from sqlalchemy import event
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

CALL_TIMEOUT_ARG = "tessera_call_timeout"
FREEZE_ARG = "tessera_freeze_seconds"
# How often a wait wakes up to check its deadlines (psycopg's own default interval).
_WAIT_INTERVAL = 0.1
SILENCE_HOLD_SECONDS = 1.0


class CallTimeout(psycopg.OperationalError):
    """The server did not answer a round trip within the call deadline; the connection is closed."""


class ServerSilent(psycopg.OperationalError):
    """The server has been found silent (frozen): no round trip or connection attempted, or the waiting one ended."""


class _Server:
    """What this process knows of one PostgreSQL server's answers, for every engine and thread that uses it."""

    def __init__(self, conninfo: str, freeze_seconds: float) -> None:
        self.conninfo = conninfo
        self.freeze_seconds = freeze_seconds
        self._lock = threading.Lock()
        self._until = 0.0  # monotonic time the hold ends; 0 while the server answers
        self._silenced_at = 0.0  # when the server was last found silent
        self._probing = False
        # When a call of this process last got an answer; set without the lock (one float, read loosely).
        self.answered_at = time.monotonic()

    def admit(self) -> bool:
        """Let a connection attempt go ahead (True if it probes a silent server); `ServerSilent` if not."""
        with self._lock:
            if not self._until:
                return False
            if self._probing or time.monotonic() < self._until:
                raise ServerSilent("the database has not answered lately; no connection attempted")
            self._probing = True
            return True

    def heard(self, *, probe: bool = False) -> None:
        """The server answered, or refused: it is not silent."""
        with self._lock:
            self._until = 0.0
            self.answered_at = time.monotonic()
            if probe:
                self._probing = False

    def timed_out(self, *, probe: bool = False) -> None:
        """The server let a call or a connection attempt time out: presumed silent."""
        with self._lock:
            self._silenced_at = now = time.monotonic()
            self._until = now + SILENCE_HOLD_SECONDS
            if probe:
                self._probing = False

    def check_waiting(self, started: float) -> None:
        """Called while a call begun at `started` waits: `ServerSilent` once the server is found silent.

        When no call has had an answer for half of `freeze_seconds`, this call probes the server
        (unless another is probing it already) for the other half.
        """
        now = time.monotonic()
        if self._silenced_at >= started or (self._until and now < self._until):
            raise ServerSilent("the database was found silent while this call waited")
        half = self.freeze_seconds / 2
        if not half or now - started < half or now - self.answered_at < half:
            return  # not waiting long, or the server answers others: a slow statement, not a frozen server
        with self._lock:
            if self._probing:
                return
            self._probing = True
        if not self.probe():
            log.warning("the database did not answer a new connection within %.1f s; calls waiting on it end", half)
            raise ServerSilent("the database does not answer (frozen?)")

    def probe(self) -> bool:
        """With the probe taken (`_probing`): whether the server answers a new connection; the verdict is
        recorded and the probe released."""
        try:
            answered = self._answers_a_new_connection()
        except BaseException:
            with self._lock:
                self._probing = False
            raise
        if answered:
            self.heard(probe=True)
        else:
            self.timed_out(probe=True)
        return answered

    def _answers_a_new_connection(self) -> bool:
        """True when the server completes a connection's handshake within half of `freeze_seconds` (or refuses it)."""
        seconds = self.freeze_seconds / 2
        try:
            connection = waiting.wait_conn(generators.connect(self.conninfo), interval=_WAIT_INTERVAL, timeout=seconds)
        except psycopg.errors._WaitTimeout:
            return False
        except psycopg.Error:
            return True  # an answer, if not a welcome one (too many clients, a shutdown)
        connection.finish()
        return True


# `psycopg.Connection.connect` arguments that are not connection parameters (SQLAlchemy passes `context`).
_PSYCOPG_ONLY_PARAMS = frozenset({"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"})
_servers: dict[str, _Server] = {}
_servers_lock = threading.Lock()


def _server(conninfo: str, freeze_seconds: float) -> _Server:
    with _servers_lock:
        server = _servers.get(conninfo)
        if server is None:
            server = _servers[conninfo] = _Server(conninfo, freeze_seconds)
        return server


class DeadlineConnection(psycopg.Connection):
    """A psycopg connection whose round trips end when its server is found frozen, or at `call_timeout`
    seconds (None: no limit)."""

    call_timeout: float | None = None
    server: _Server | None = None

    def wait(self, gen: Any, interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        server = self.server
        if timeout is not None or server is None:  # psycopg's own bounded waits; a connection still being set up
            return super().wait(gen, interval, timeout)
        deadline = self.call_timeout
        started = time.monotonic()
        try:
            result = super().wait(_watched(gen, server, started), interval, deadline)
        except ServerSilent:
            self.close()  # mid-protocol: never to be used again
            raise
        except psycopg.OperationalError as error:
            if deadline is None or time.monotonic() - started < deadline:
                raise
            self.close()
            server.timed_out()
            log.warning("the database did not answer within %.1f s; connection dropped", deadline)
            raise CallTimeout(f"the database did not answer within {deadline:g} s") from error
        server.answered_at = time.monotonic()
        return result


def _watched(gen: Generator, server: _Server, started: float) -> Generator:
    """`gen`, with each idle tick of its wait (`READY_NONE`) asking `server` whether to go on waiting."""
    try:
        state = next(gen)
        while True:
            ready = yield state
            if not ready:
                server.check_waiting(started)
            state = gen.send(ready)
    except StopIteration as done:
        return done.value


@event.listens_for(Engine, "do_connect")
def _connect_with_deadline(_dialect: Any, _record: Any, cargs: tuple, cparams: dict) -> Any:
    """Connect engines given `CALL_TIMEOUT_ARG` with a `DeadlineConnection`; others as usual."""
    if CALL_TIMEOUT_ARG not in cparams:
        return None
    seconds = float(cparams.pop(CALL_TIMEOUT_ARG))
    freeze_seconds = float(cparams.pop(FREEZE_ARG, 0) or 0)
    libpq_params = {name: value for name, value in cparams.items() if name not in _PSYCOPG_ONLY_PARAMS}
    server = _server(make_conninfo(*cargs, **libpq_params), freeze_seconds)
    probe = server.admit()
    if probe and freeze_seconds > 0:
        # Asked within half of `DB_FREEZE_SECONDS`, not the longer connect timeout, whether it is back.
        if not server.probe():
            raise ServerSilent("the database still does not answer; no connection made")
        probe = False
    try:
        connection = DeadlineConnection.connect(*cargs, **cparams)
    except psycopg.errors.ConnectionTimeout:
        server.timed_out(probe=probe)
        raise
    except BaseException:
        server.heard(probe=probe)
        raise
    server.heard(probe=probe)
    connection.call_timeout = seconds if seconds > 0 else None
    connection.server = server
    return connection
