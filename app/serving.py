"""The application as a long-running process serves it: the web process (the Procfile's `web` line,
`python -m app.serving`, granian's command line with `WebServer`), its factory, and the worker's app.

`WebServer` is granian's server with three of Tessera's rules, which granian has no option for:

- It refuses to start, with one line, on an address where something listens already. granian's
  workers listen with `SO_REUSEPORT`, so a second run on a taken port would start without a word
  and the two would split the requests between them (sessions, CSRF tokens and codes then fail at
  random).
- A worker killed by a signal (an out-of-memory kill, `kill -9`, a crash) is respawned however
  often it happens. granian ends the whole server when a worker dies within 5.5 s of its respawn
  (its crash-loop rule), which is right for a worker that cannot start and wrong for one something
  kills. A worker that refused its configuration (exit status 3) ends the server at once.
- A stop (SIGTERM, SIGINT) that reaches a worker still building the application ends it. A worker
  starts with the main process's signal handlers, which only note the stop in the worker's copy of
  the server; the main process then waited for that worker forever.
"""

from __future__ import annotations

import errno
import gc
import os
import signal
import socket
import sys
import time
from typing import Any

from flask import Flask
from granian.server import Server

from app import create_app
from app.config import UnsafeConfiguration, record_served_address
from app.web.hot import HotLayer


def web_app() -> Flask:
    """`create_app()` for the web server (`python -m app.serving ... --factory app.serving:web_app`): its own
    access log in front, start-up objects frozen; where it serves recorded for operator commands."""
    application = create_app()
    HotLayer.of(application).access_log = True
    record_served_address(application.config)
    freeze_start_up_objects()
    return application


def freeze_start_up_objects() -> None:
    """Put every object built so far (the application, its modules, schemas and statements, some
    200,000 of them, alive as long as the process) out of the garbage collector's sight.

    A full collection walks every tracked object: about 50 ms over those, a stall of every request
    the process holds when it happens (the long tail of the latency). Frozen, it takes well under
    a millisecond; a process that forks after this keeps those pages shared, too.
    """
    gc.collect()
    gc.freeze()


class WebServer(Server):
    """granian's server, refusing a taken port, outliving killed workers, stopping workers that still start."""

    def serve(self, *args: Any, **kwargs: Any) -> None:
        if not self.bind_uds:
            refuse_a_taken_address(self.bind_addr, self.bind_port)
        self.respawned_wrks = _RespawnTimes(self.wrks)
        super().serve(*args, **kwargs)

    def signal_handler_interrupt(self, signum: int, *args: Any, **kwargs: Any) -> None:
        if self.pid is not None and os.getpid() != self.pid:
            # A worker that has not yet set its own handlers: stop as the signal's default would.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        super().signal_handler_interrupt(signum, *args, **kwargs)


class _RespawnTimes(dict):
    """granian's record of when each worker was last respawned (`Server.respawned_wrks`), as its crash-loop
    rule reads it: a dead worker whose `respawned_wrks.get(index, 0)` is less than 5.5 s ago ends the server.

    A worker that a signal killed has no respawn to count against it: it is respawned, however often. One
    that refused to start (`UnsafeConfiguration`'s exit status) counts as respawned just now: the server
    ends at once, as no respawn would start it (on a busy machine its next refusal may come later than
    5.5 s). Any other exit is granian's rule.
    """

    def __init__(self, workers: list) -> None:
        super().__init__()
        self._workers = workers

    def get(self, index: Any, default: Any = None) -> Any:
        exit_code = getattr(self._workers[index].inner, "exitcode", None)  # a process's; threads have none
        if exit_code is not None and exit_code < 0:
            return default
        if exit_code == UnsafeConfiguration.EXIT_STATUS:
            return time.monotonic()
        return super().get(index, default)


def refuse_a_taken_address(host: str, port: int) -> None:
    """Stop the process with one line (`UnsafeConfiguration`, exit status 3) when `host:port` cannot be
    listened on: something listens there already, or the address is not this machine's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # Like the workers' own sockets, it may take an address that only connections closing hold.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            reason = "in use (another Tessera or another server listens there; stop it or set PORT)"
            refusal = UnsafeConfiguration(
                f"cannot listen on {host}:{port}: {reason if error.errno == errno.EADDRINUSE else error.strerror}"
            )
            print(refusal.message, file=sys.stderr, flush=True)
            raise refusal from None


def main() -> None:
    """The web process: granian's command line, serving with `WebServer`."""
    from granian import cli

    cli.Server = WebServer
    cli.entrypoint()


if __name__ == "__main__":
    main()
