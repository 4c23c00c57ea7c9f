"""Tessera built as a Heroku-style Python buildpack builds it, then run from its Procfile.

The repository's files (no virtual environment, no instance) are copied into an empty directory;
`uv sync --frozen --no-dev --compile-bytecode` installs `uv.lock` into a clean environment of its own (as the buildpack
does for a `uv.lock` with `.python-version`); the Procfile's `release` line migrates a new
PostgreSQL database; `web` and `worker` start from their lines with `PORT`, `DATABASE_URL` and
`REDIS_URL`, and a canary job runs end to end over HTTP. uv's package cache makes the install quick.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.support.bench import free_port, wait_for_url
from tests.support.environment import REPO_ROOT, copy_repository

pytestmark = pytest.mark.realworker


def procfile() -> dict[str, str]:
    lines = (REPO_ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def _uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip("uv is not installed (the README's commands and .ci/run install it)")
    return found


@pytest.fixture
def database_url():
    server = sa.engine.make_url(os.environ["DIRECT_DATABASE_URL"])
    name = f"tessera_buildpack_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield server.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def test_built_from_the_lock_and_run_from_the_procfile(tmp_path: Path, database_url: str):
    assert (REPO_ROOT / ".python-version").read_text().strip() == f"{sys.version_info[0]}.{sys.version_info[1]}"
    app_dir, venv = tmp_path / "app", tmp_path / "venv"
    app_dir.mkdir()
    copy_repository(app_dir)
    assert not (app_dir / ".venv").exists() and (app_dir / "uv.lock").exists()
    built = subprocess.run([_uv(), "sync", "--frozen", "--no-dev", "--compile-bytecode", "--python", sys.executable],
                           cwd=app_dir, env={**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr

    port = free_port()
    keep = ("PATH", "HOME", "LANG", "SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PORT=str(port), DATABASE_URL=database_url,
               REDIS_URL=os.environ["DIRECT_REDIS_URL"], CELERY_QUEUE=f"tessera-buildpack-{uuid.uuid4().hex[:8]}",
               BASE_URL=f"http://localhost:{port}", WEB_CONCURRENCY="1", WORKER_CONCURRENCY="1")  # fmt: skip
    lines = procfile()
    released = subprocess.run(["bash", "-c", lines["release"]], cwd=app_dir, env=env, capture_output=True, text=True,
                              timeout=180)  # fmt: skip
    assert released.returncode == 0, released.stderr

    processes = {}
    try:
        for name in ("web", "worker"):
            with open(tmp_path / f"{name}.log", "wb") as log:
                processes[name] = subprocess.Popen(["bash", "-c", lines[name]], cwd=app_dir, env=env, stdout=log,
                                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_for_url(f"{url}/readyz", processes["web"], timeout=90)
        created = subprocess.run(["tessera-admin", "clients", "create-master", "--name", "Buildpack", "--json"],
                                 cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert created.returncode == 0, created.stderr
        token = json.loads(created.stdout.strip().splitlines()[-1])["api_token"]
        headers = {"x-api-token": token}
        started = httpx.post(f"{url}/v1/jobs/canary", json={"delay_ms": 10}, headers=headers, timeout=10)
        assert started.status_code == 202, started.text
        deadline = time.monotonic() + 60
        while (job := httpx.get(url + started.headers["Location"], headers=headers, timeout=10).json()["data"])[
            "state"
        ] not in {"succeeded", "failed"}:
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["state"] == "succeeded", job
    except AssertionError as failure:
        logs = "\n".join(f"--- {name} ---\n{(tmp_path / f'{name}.log').read_text()[-3000:]}" for name in processes)
        raise AssertionError(f"{failure}\n{logs}") from failure
    finally:
        for process in processes.values():
            _stop(process)
