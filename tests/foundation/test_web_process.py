"""The Procfile's web process refuses a port something listens on, with one line, stops on SIGTERM even while its
workers are still starting, and ends when its workers refuse the configuration."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from tests.support import environment
from tests.support.bench import free_port, procfile_web_command, wait_for_url

HONCHO_GRACE_SECONDS = 5.0


def start_web(port: int, log_path: Path, **settings: str) -> subprocess.Popen:
    """The Procfile's web line on loopback `port` (two workers) with `settings`, its output in `log_path`."""
    command = procfile_web_command().replace("0.0.0.0", "127.0.0.1")
    env = {**os.environ, "PORT": str(port), "WEB_CONCURRENCY": "2", "WEB_THREADS": "2", **settings}
    with open(log_path, "wb") as log:
        return subprocess.Popen(["sh", "-c", "exec " + command], cwd=environment.REPO_ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def ended_within(process: subprocess.Popen, seconds: float) -> bool:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def assert_refused_in_one_line(process: subprocess.Popen, log_path: Path, port: int) -> None:
    assert ended_within(process, 60), "the web process started on a taken port"
    lines = log_path.read_text().strip().splitlines()
    assert process.returncode == 3, lines
    assert lines == [f"Tessera refuses to start: cannot listen on 127.0.0.1:{port}: in use (another Tessera or "
                     "another server listens there; stop it or set PORT)"]  # fmt: skip


def test_the_web_process_refuses_a_port_another_server_listens_on_in_one_line(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        process = start_web(port, tmp_path / "web.log")
        try:
            assert_refused_in_one_line(process, tmp_path / "web.log", port)
        finally:
            environment.stop_process(process)


def test_a_second_web_process_on_a_taken_port_refuses_and_the_first_serves_and_stops(tmp_path):
    port = free_port()
    first = start_web(port, tmp_path / "first.log")
    try:
        wait_for_url(f"http://127.0.0.1:{port}/healthz", first, timeout=90)
        second = start_web(port, tmp_path / "second.log")
        try:
            assert_refused_in_one_line(second, tmp_path / "second.log", port)
        finally:
            environment.stop_process(second)
        assert all(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200 for _ in range(20))
        os.killpg(first.pid, signal.SIGTERM)
        assert ended_within(first, HONCHO_GRACE_SECONDS), (tmp_path / "first.log").read_text()[-2000:]
    finally:
        environment.stop_process(first)


def test_a_stop_while_the_workers_still_start_ends_the_web_process_within_honchos_grace(tmp_path):
    log_path = tmp_path / "web.log"
    process = start_web(free_port(), log_path)
    try:
        deadline = time.monotonic() + 60
        while log_path.read_text().count("Spawning worker") < 2:  # forked, building the application
            assert time.monotonic() < deadline and process.poll() is None, log_path.read_text()
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGTERM)
        assert ended_within(process, HONCHO_GRACE_SECONDS), log_path.read_text()[-2000:]
    finally:
        environment.stop_process(process)


def test_a_refused_configuration_ends_the_web_process_without_respawning_its_workers(tmp_path):
    log_path = tmp_path / "web.log"
    process = start_web(free_port(), log_path, DEV_OUTBOX="1", BASE_URL="https://tessera.example")
    try:
        # However long a worker takes to refuse (granian's own rule wants the second refusal within 5.5 s).
        assert ended_within(process, 120), log_path.read_text()[-2000:]
    finally:
        environment.stop_process(process)
    assert process.returncode != 0
    log = log_path.read_text()
    assert "Tessera refuses to start: DEV_OUTBOX=1" in log
    assert "Respawning" not in log, log
