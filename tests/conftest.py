"""Shared fixtures: one application per test session, on SQLite or on PostgreSQL + Redis.

Without `DATABASE_URL` the suite runs on a fresh SQLite file and jobs run eagerly in process.
With `DATABASE_URL` (PostgreSQL) and `REDIS_URL`, a fresh database is created for the session,
migrated with Alembic, and a real Celery worker process runs the jobs from a queue of its own.
Each test makes its own tenant, so tests stay isolated without a global clean-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

RUN_ID = uuid.uuid4().hex[:10]
TMP_DIR = Path(tempfile.mkdtemp(prefix=f"tessera-test-{RUN_ID}-"))
REPO_ROOT = Path(__file__).resolve().parents[1]
USING_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres", "postgresql"))


def _create_postgres_database(server_url: str) -> str:
    """Create a fresh database next to the one in `server_url`; returns its URL."""
    import sqlalchemy as sa

    name = f"tessera_test_{RUN_ID}"
    url = sa.engine.make_url(server_url.replace("postgres://", "postgresql://", 1))
    if url.drivername in {"postgresql", "postgres"}:
        url = url.set(drivername="postgresql+psycopg")
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


def _drop_postgres_database(test_url: str) -> None:
    import sqlalchemy as sa

    url = sa.engine.make_url(test_url)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    admin.dispose()


os.environ["TESSERA_INSTANCE_DIR"] = str(TMP_DIR / "instance")
os.environ.setdefault("DEV_OUTBOX", "1")
# The claim page and its credit grants are tested here; only the embedded default is a testnet by itself.
os.environ.setdefault("AGENT_NETWORK", "testnet")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ["CELERY_QUEUE"] = f"tessera-test-{RUN_ID}"
DB_PROXY = REDIS_PROXY = None
if USING_POSTGRES:
    from sqlalchemy.engine import make_url

    # On PostgreSQL the service refuses to make up its secrets; the run (and its worker) shares these.
    for _name in ("SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY"):
        os.environ.setdefault(_name, f"test-{_name.lower()}-{RUN_ID}")

    from tests.support.netproxy import TcpProxy

    # Workers talk to PostgreSQL and Redis directly; this process goes through proxies that the
    # failure tests cut to make a dependency unreachable for the web side.
    os.environ["DIRECT_DATABASE_URL"] = _create_postgres_database(os.environ["DATABASE_URL"])
    os.environ["DIRECT_REDIS_URL"] = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    _db_url = make_url(os.environ["DIRECT_DATABASE_URL"])
    DB_PROXY = TcpProxy(_db_url.host or "127.0.0.1", _db_url.port or 5432)
    os.environ["DATABASE_URL"] = _db_url.set(host="127.0.0.1", port=DB_PROXY.port).render_as_string(
        hide_password=False
    )
    _redis_url = make_url(os.environ["DIRECT_REDIS_URL"])
    REDIS_PROXY = TcpProxy(_redis_url.host or "127.0.0.1", _redis_url.port or 6379)
    os.environ["REDIS_URL"] = _redis_url.set(host="127.0.0.1", port=REDIS_PROXY.port).render_as_string(
        hide_password=False
    )
else:
    os.environ["DATABASE_URL"] = f"sqlite:///{TMP_DIR / 'tessera.sqlite'}"
    os.environ["CELERY_ALWAYS_EAGER"] = "1"
    os.environ.pop("REDIS_URL", None)


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `realworker` need PostgreSQL + Redis; the SQLite run leaves them out."""
    if USING_POSTGRES:
        return
    kept = [item for item in items if item.get_closest_marker("realworker") is None]
    left_out = [item for item in items if item.get_closest_marker("realworker") is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def pytest_sessionfinish(session, exitstatus) -> None:
    if USING_POSTGRES:
        try:
            _drop_postgres_database(os.environ["DIRECT_DATABASE_URL"])
        except Exception as exc:  # a leftover test database is not worth failing the run
            print(f"could not drop test database: {exc}", file=sys.stderr)


def start_worker(*, concurrency: int = 2, extra_env: dict | None = None, log_path: Path | None = None):
    """Start a real Celery worker process on this session's queue; returns the Popen."""
    env = dict(os.environ)
    env.pop("CELERY_ALWAYS_EAGER", None)
    if USING_POSTGRES:
        env["DATABASE_URL"] = os.environ["DIRECT_DATABASE_URL"]
        env["REDIS_URL"] = os.environ["DIRECT_REDIS_URL"]
    env.update(extra_env or {})  # a test may route a worker through a proxy of its own
    queues = f"{os.environ['CELERY_QUEUE']},{os.environ['CELERY_QUEUE']}.sweep"
    command = [
        sys.executable, "-m", "celery", "-A", "worker", "worker",
        "--concurrency", str(concurrency), "--pool", "prefork",
        "--queues", queues, "--loglevel", "WARNING",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]
    # The child keeps its own copy of the log file descriptor once ours is closed.
    with open(log_path or TMP_DIR / f"worker-{uuid.uuid4().hex[:6]}.log", "ab") as log:
        return subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_process(process: subprocess.Popen, sig: int | None = None) -> None:
    import signal

    if process.poll() is None:
        os.killpg(process.pid, sig or signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@pytest.fixture(scope="session")
def app():
    from flask_migrate import upgrade

    from app import create_app

    application = create_app({"TESTING": True, "RATELIMIT_KEY_PREFIX": f"tessera-test-{RUN_ID}"})
    with application.app_context():
        upgrade()
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


@dataclass
class MasterClient:
    client_id: int
    client_secret: str
    api_token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-token": self.api_token}


def make_master(app, name: str = "Test organisation", **kwargs) -> MasterClient:
    from app.db import transaction
    from app.tenancy import service

    with app.app_context(), transaction():
        created, secret = service.create_master_client(name, **kwargs)
        issued = service.issue_api_token(created.id, name="test")
        return MasterClient(created.id, secret, issued.plaintext)


@pytest.fixture
def master(app) -> MasterClient:
    return make_master(app)


def fetch_job(app, job_id: str) -> dict:
    from app.extensions import db
    from app.jobs.schemas import JobOut
    from app.jobs.service import get_job

    with app.app_context():
        job = get_job(job_id)
        data = JobOut().dump(job) if job is not None else None
        db.session.rollback()
        return data


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
