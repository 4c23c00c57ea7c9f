"""The Procfile's web process survives the loss of its workers (out-of-memory kills, `kill -9`), however quick:
it respawns them and keeps answering."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support import environment
from tests.support.bench import procfile_web_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except FileNotFoundError:  # a thread that ended meanwhile (granian's watcher of a dead worker)
            continue
    return found


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout}s")


class Load:
    """Requests to `/healthz`, one after the other on fresh connections, in a thread; counts the answers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answered = 0
        self.failures: list[str] = []
        self.answered_after_kill = 0
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer = httpx.get(self.url + "/healthz", timeout=10)
            except httpx.TransportError as error:
                self.failures.append(type(error).__name__)
                continue
            if answer.status_code == 200:
                self.answered += 1
                self.answered_after_kill += self.killed
            else:
                self.failures.append(str(answer.status_code))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@contextmanager
def procfile_web() -> Iterator[tuple[subprocess.Popen, str, Path]]:
    """The Procfile's web process with two workers of two threads on a free loopback port, answering; yields the
    process, its URL and its log."""
    port = _free_port()
    command = procfile_web_command().replace("0.0.0.0", "127.0.0.1")
    log_path = environment.TMP_DIR / f"web-worker-loss-{port}.log"
    env = {**os.environ, "PORT": str(port), "WEB_CONCURRENCY": "2", "WEB_THREADS": "2"}
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            ["sh", "-c", "exec " + command],
            cwd=environment.REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: len(_children(server.pid)) == 2, 60, "two web workers")
        _wait_for(lambda: _answers(url), 60, "answer from /healthz")
        yield server, url, log_path
    finally:
        environment.stop_process(server)


def test_killing_one_web_worker_under_load_leaves_the_server_answering():
    with procfile_web() as (server, url, log_path):
        load = Load(url)
        try:
            _wait_for(lambda: load.answered >= 20, 30, "answers before the kill")
            victim = min(_children(server.pid))
            os.kill(victim, signal.SIGKILL)
            load.killed = True
            _wait_for(
                lambda: server.poll() is not None or len(_children(server.pid) - {victim}) == 2, 30, "respawned worker"
            )
            assert server.poll() is None, log_path.read_text()[-2000:]
            _wait_for(lambda: load.answered_after_kill >= 50, 30, "answers after the kill")
        finally:
            load.stop()
        assert server.poll() is None, log_path.read_text()[-2000:]
        # The one request the dead worker held may fail; every other request is answered.
        assert len(load.failures) <= 1, (load.failures, log_path.read_text()[-2000:])
        assert _answers(url)


QUICK_KILLS = 10


def test_the_web_outlives_ten_quick_worker_kills():
    # Each kill hits the worker the one before made the server respawn, well within granian's 5.5 s crash-loop window.
    with procfile_web() as (server, url, log_path):
        load = Load(url)
        try:
            workers = _children(server.pid)
            victim = min(workers)
            for _kill in range(QUICK_KILLS):
                os.kill(victim, signal.SIGKILL)
                respawned = _wait_for(
                    lambda known=workers: server.poll() is not None or _children(server.pid) - known,
                    30,
                    "respawned worker",
                )
                assert server.poll() is None, log_path.read_text()[-2000:]
                workers = _children(server.pid)
                (victim,) = respawned
                time.sleep(0.5)
            assert server.poll() is None, log_path.read_text()[-2000:]
            load.killed = True
            _wait_for(lambda: load.answered_after_kill >= 50, 60, "answers after the kills")
        finally:
            load.stop()
        assert server.poll() is None, log_path.read_text()[-2000:]
        # At most the one request a dead worker held fails with it.
        assert len(load.failures) <= QUICK_KILLS, (load.failures, log_path.read_text()[-2000:])
        assert _answers(url)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
