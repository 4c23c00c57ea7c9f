"""`honcho start` without process names runs the whole Procfile: the release step migrates, says why it stays, and
waits; web (on `PORT`, the Procfile's first line), worker and beat keep running; Ctrl-C stops them all within
honcho's grace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.ops.release import UNDER_HONCHO
from tests.support.bench import free_port, wait_for_url
from tests.support.environment import REPO_ROOT

# Settings of this test run that would otherwise leak into the service started here.
_RUN_SETTINGS = ("DATABASE_URL", "REDIS_URL", "DIRECT_DATABASE_URL", "DIRECT_REDIS_URL", "CELERY_ALWAYS_EAGER",
                 "CELERY_QUEUE", "BASE_URL", "PORT", "SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY",
                 "AGENT_NETWORK_URL", "OIDC_ISSUER")  # fmt: skip
# honcho stopped the service this long after the release step's exit: it must outlast that.
RELEASE_EXIT_STOPPED_THE_SERVICE_AFTER = 7.0


def _wait_for_text(log: Path, text: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None and time.monotonic() < deadline, f"no {text!r}"
        time.sleep(0.2)


@pytest.mark.embedded
def test_honcho_start_without_names_migrates_and_keeps_the_service_running(tmp_path: Path):
    port = free_port()
    url = f"http://localhost:{port}"
    env = {name: value for name, value in os.environ.items() if name not in _RUN_SETTINGS}
    # As the README's run command, one BASE_URL for every process (honcho gives each a PORT of its own).
    env.update(PORT=str(port), BASE_URL=url, TESSERA_INSTANCE_DIR=str(tmp_path / "instance"), LOG_LEVEL="WARNING",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    log = tmp_path / "honcho.log"
    with open(log, "wb") as output:  # a fresh instance: nothing migrated before
        honcho = subprocess.Popen(["honcho", "start"], cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
    try:
        _wait_for_text(log, UNDER_HONCHO, honcho)
        wait_for_url(f"{url}/readyz", honcho, timeout=120)
        time.sleep(RELEASE_EXIT_STOPPED_THE_SERVICE_AFTER + 1)
        assert honcho.poll() is None
        created = subprocess.run(["tessera-admin", "clients", "create-master", "--name", "Honcho", "--json"],
                                 cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert created.returncode == 0, created.stderr
        headers = {"x-api-token": json.loads(created.stdout.strip().splitlines()[-1])["api_token"]}
        started = httpx.post(f"{url}/v1/jobs/canary", json={}, headers=headers, timeout=10)
        assert started.status_code == 202, started.text
        deadline = time.monotonic() + 60
        while (job := httpx.get(url + started.headers["Location"], headers=headers, timeout=10).json()["data"])[
            "state"
        ] != "succeeded":
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        os.kill(honcho.pid, signal.SIGINT)  # Ctrl-C
        honcho.wait(timeout=20)
        assert "SIGKILL" not in log.read_text(), "honcho had to kill a process"
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n--- honcho's log ---\n{log.read_text()[-4000:]}") from failure
    finally:
        _stop(honcho)


def _stop(honcho: subprocess.Popen) -> None:
    """honcho stops its processes (each in a session of its own) on SIGTERM; SIGKILL only if it does not end."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if honcho.poll() is not None:
            return
        os.kill(honcho.pid, sig)
        try:
            honcho.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
