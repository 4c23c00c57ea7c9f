"""Servers a test starts: the application under granian (as the Procfile runs it), and small answering servers
on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import requests

from tests.support import environment

# (method, path, request body) -> (content type, response body), answered with status 200.
Answer = Callable[[str, str, bytes], tuple[str, bytes]]


@contextmanager
def web_server(port: int, env: dict[str, str], options: list[str], *, log_name: str) -> Iterator[str]:
    """The application under the Procfile's web server (granian's, `python -m app.serving`) on `port` with
    `env` and extra `options`; yields its URL.

    Waits for `/healthz`; the server's output goes to `log_name` in the test run's directory.
    """
    url = f"http://127.0.0.1:{port}"
    with open(environment.TMP_DIR / log_name, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.serving", "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
             "--no-ws", *options, "--factory", "app.serving:web_app"],
            cwd=environment.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise AssertionError(f"the web server did not start; see {log_name}")
            time.sleep(0.2)
        yield url
    finally:
        environment.stop_process(process)


def serve_on_loopback(answer: Answer, *, name: str | None = None) -> ThreadingHTTPServer:
    """Answer GET and POST requests with `answer` on a loopback port, in a daemon thread.

    The caller shuts the returned server down (or leaves it to the end of the process).
    """

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            content_type, body = answer(self.command, self.path, self.rfile.read(length) if length else b"")
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _reply

        def log_message(self, *args) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


class LogoutReceiver:
    """A relying party's back-channel logout endpoint on loopback; fails the first `failures` calls."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.failures = 0
        self.calls = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                form = parse_qs(self.rfile.read(length).decode())
                receiver.calls += 1
                if receiver.calls <= receiver.failures:
                    self.send_response(503)
                else:
                    receiver.tokens.append(form["logout_token"][0])
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_port}"
        self.url = f"http://{self.host}/backchannel-logout"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 40.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.tokens) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.tokens


class DripServer:
    """A peer that answers every request one byte every `interval` seconds, headers included, for `duration`.

    A slow `jwks_uri` or logout endpoint: `connections` counts the requests it received and `open`
    those it is still dripping to.
    """

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + b" " * 100000

    def __init__(self, *, interval: float = 0.3, duration: float = 12.0) -> None:
        self.interval, self.duration = interval, duration
        self.connections = 0
        self.open = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept_loop, daemon=True, name="drip-server").start()

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _address = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self.open += 1
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        ends = time.monotonic() + self.duration
        try:
            connection.recv(65536)  # the request (small: a GET or a logout token form)
            for byte in self.ANSWER:
                if time.monotonic() > ends or self._stopped.wait(self.interval):
                    break
                connection.sendall(bytes([byte]))
        except OSError:
            pass
        finally:
            connection.close()
            with self._lock:
                self.open -= 1

    def wait_until_idle(self, timeout: float) -> bool:
        """True once no request is being dripped to (the caller gave up), within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.open == 0:
                    return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
