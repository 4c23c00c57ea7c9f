"""Shared fixtures: one application per test session, on SQLite or on PostgreSQL + Redis.

Without `DATABASE_URL` the suite runs on a fresh SQLite file and jobs run eagerly in process.
With `DATABASE_URL` (PostgreSQL) and `REDIS_URL`, a fresh database is created for the session,
migrated with Alembic, and a real Celery worker process runs the jobs from a queue of its own.
Each test makes its own tenant, so tests stay isolated without a global clean-up.
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
import time

import pytest

from tests.support import environment
from tests.support.environment import RUN_ID, TMP_DIR, USING_POSTGRES, fetch_job, start_worker, stop_process
from tests.support.tenancy import MasterClient, make_master

environment.configure()


def pytest_sessionstart(session) -> None:
    """Compile the application's sources once: the suite starts hundreds of processes of it (CLI
    commands, web servers, workers), and where PYTHONDONTWRITEBYTECODE is set each of them would
    compile every module again (seconds of CPU per process). The installed packages are compiled by
    `uv sync --compile-bytecode` (the README's commands)."""
    for package in ("app", "worker", "migrations"):
        compileall.compile_dir(environment.REPO_ROOT / package, quiet=1, workers=0)


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `realworker` need PostgreSQL + Redis: the SQLite run leaves them out. Tests marked
    `embedded` run an instance of their own on the embedded default, untouched by the run's database
    and broker: the PostgreSQL + Redis run leaves them out (they would repeat the SQLite run's)."""
    marker = "embedded" if USING_POSTGRES else "realworker"
    kept = [item for item in items if item.get_closest_marker(marker) is None]
    left_out = [item for item in items if item.get_closest_marker(marker) is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def pytest_sessionfinish(session, exitstatus) -> None:
    if USING_POSTGRES:
        try:
            environment.drop_postgres_database(os.environ["DIRECT_DATABASE_URL"])
        except Exception as exc:  # a leftover test database is not worth failing the run
            print(f"could not drop test database: {exc}", file=sys.stderr)


@pytest.fixture(scope="session")
def app():
    from flask_migrate import upgrade

    from app import create_app

    application = create_app({"TESTING": True, "RATELIMIT_KEY_PREFIX": f"tessera-test-{RUN_ID}"})
    with application.app_context():
        upgrade()
        if USING_POSTGRES:
            from app.jobs.service import sweep_outbox

            sweep_outbox()  # the run's broker marker: a broker found whole, not one that lost the run's jobs
    return application


class WorkerControl:
    """The session's worker process, which a test may stop, kill and start again."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def start(self, extra_env: dict | None = None) -> None:
        if self.process is None or self.process.poll() is not None:
            self.process = start_worker(extra_env=extra_env, log_path=TMP_DIR / "worker-session.log")

    def stop(self, sig: int | None = None) -> None:
        if self.process is not None:
            stop_process(self.process, sig)


@pytest.fixture(scope="session")
def real_worker(app):
    """A Celery worker process for the whole session (PostgreSQL + Redis runs only)."""
    control = WorkerControl()
    if USING_POSTGRES:
        control.start()
    yield control
    control.stop()


@pytest.fixture
def client(app, real_worker):
    return app.test_client()


@pytest.fixture
def master(app) -> MasterClient:
    return make_master(app)


@pytest.fixture
def wait_for_job(app, real_worker):
    def wait(job_id: str, timeout: float = 20.0, states: tuple[str, ...] = ("succeeded", "failed")) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = fetch_job(app, job_id)
            if job is not None and job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} not in {states} after {timeout}s: {job}")
            time.sleep(0.02)

    return wait


@pytest.fixture
def chromium():
    """A headless Chromium for the screenshot tests (`tests/support/screenshots.py`)."""
    from tests.support.screenshots import start_chromium

    driver = start_chromium()
    yield driver
    driver.quit()
