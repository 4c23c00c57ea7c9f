"""A loopback TCP proxy that a test can cut and restore, to make a dependency unreachable."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    """Forwards 127.0.0.1:<port> to `upstream`; `cut()` drops every connection and refuses new ones.

    `blackhole()` is a network partition instead: connections stay open but nothing crosses, and
    new ones are accepted but never answered. `restore()` ends either; data held by a partition
    then flows on (as TCP retransmits it) and connections accepted during it are dropped.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._enabled = threading.Event()
        self._enabled.set()
        self._flowing = threading.Event()
        self._flowing.set()
        self._held: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept_loop, daemon=True, name="tcp-proxy").start()

    def cut(self) -> None:
        self._enabled.clear()
        with self._lock:
            for sock in list(self._sockets):
                _close(sock)
            self._sockets.clear()

    def blackhole(self) -> None:
        self._flowing.clear()

    def restore(self) -> None:
        self._enabled.set()
        if not self._flowing.is_set():
            with self._lock:
                held, self._held = self._held, set()
            for sock in held:
                _close(sock)
            self._flowing.set()

    def _accept_loop(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            if not self._enabled.is_set():
                _close(downstream)
                continue
            if not self._flowing.is_set():
                with self._lock:
                    self._held.add(downstream)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(downstream)
                continue
            with self._lock:
                self._sockets.update({downstream, upstream})
            for source, target in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            with contextlib.suppress(OSError):
                while chunk := source.recv(65536):
                    self._flowing.wait()
                    target.sendall(chunk)
        finally:
            for sock in (source, target):
                _close(sock)
                with self._lock:
                    self._sockets.discard(sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
