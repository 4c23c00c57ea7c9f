"""The test run's environment: its id, paths, database choice, proxies and worker processes.

`tests/conftest.py` calls `configure()` once, before the application is imported. Without
`DATABASE_URL` the run uses a fresh SQLite file and jobs run eagerly in process. With
`DATABASE_URL` (PostgreSQL) and `REDIS_URL`, a fresh database is created for the run and this
process reaches PostgreSQL and Redis through `DB_PROXY` and `REDIS_PROXY`, which the failure tests
cut. Those two are set by `configure()`: read them as `environment.REDIS_PROXY` when used, not
with `from tests.support.environment import REDIS_PROXY` at import time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

    from tests.support.netproxy import TcpProxy

RUN_ID = uuid.uuid4().hex[:10]
TMP_DIR = Path(tempfile.mkdtemp(prefix=f"tessera-test-{RUN_ID}-"))
REPO_ROOT = Path(__file__).resolve().parents[2]
USING_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres", "postgresql"))
# Left out of a copy of the repository: what a checkout gets by being used, not by being cloned.
_NOT_COPIED = (".git", ".venv", "instance", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", "artifacts",
               "*.egg-info")  # fmt: skip
DB_PROXY: TcpProxy | None = None
REDIS_PROXY: TcpProxy | None = None


def copy_repository(target: Path) -> Path:
    """The repository's files as a push carries them into `target`: not the virtual environment,
    instance data, caches or artefacts."""
    shutil.copytree(REPO_ROOT, target, ignore=shutil.ignore_patterns(*_NOT_COPIED), symlinks=True, dirs_exist_ok=True)
    return target


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


def drop_postgres_database(test_url: str) -> None:
    import sqlalchemy as sa

    url = sa.engine.make_url(test_url)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    admin.dispose()


def configure() -> None:
    """Set this process's environment for the run (and, on PostgreSQL, its database and proxies)."""
    global DB_PROXY, REDIS_PROXY

    os.environ["TESSERA_INSTANCE_DIR"] = str(TMP_DIR / "instance")
    os.environ.setdefault("DEV_OUTBOX", "1")
    # The claim page and its credit grants are tested here; only the embedded default is a testnet by itself.
    os.environ.setdefault("AGENT_NETWORK", "testnet")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["CELERY_QUEUE"] = f"tessera-test-{RUN_ID}"
    if USING_POSTGRES:
        from sqlalchemy.engine import make_url

        from tests.support.netproxy import TcpProxy

        # On PostgreSQL the service refuses to make up its secrets; the run (and its worker) shares these.
        for name in ("SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY"):
            os.environ.setdefault(name, f"test-{name.lower()}-{RUN_ID}")

        # Workers talk to PostgreSQL and Redis directly; this process goes through proxies that the
        # failure tests cut to make a dependency unreachable for the web side.
        os.environ["DIRECT_DATABASE_URL"] = _create_postgres_database(os.environ["DATABASE_URL"])
        os.environ["DIRECT_REDIS_URL"] = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        db_url = make_url(os.environ["DIRECT_DATABASE_URL"])
        DB_PROXY = TcpProxy(db_url.host or "127.0.0.1", db_url.port or 5432)
        os.environ["DATABASE_URL"] = db_url.set(host="127.0.0.1", port=DB_PROXY.port).render_as_string(
            hide_password=False
        )
        redis_url = make_url(os.environ["DIRECT_REDIS_URL"])
        REDIS_PROXY = TcpProxy(redis_url.host or "127.0.0.1", redis_url.port or 6379)
        os.environ["REDIS_URL"] = redis_url.set(host="127.0.0.1", port=REDIS_PROXY.port).render_as_string(
            hide_password=False
        )
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{TMP_DIR / 'tessera.sqlite'}"
        os.environ["CELERY_ALWAYS_EAGER"] = "1"
        os.environ.pop("REDIS_URL", None)


def start_worker(
    *, concurrency: int = 2, extra_env: dict | None = None, log_path: Path | None = None
) -> subprocess.Popen:
    """Start a real Celery worker process on this run's queue; returns the Popen."""
    env = dict(os.environ)
    env.pop("CELERY_ALWAYS_EAGER", None)
    if USING_POSTGRES:
        env["DATABASE_URL"] = os.environ["DIRECT_DATABASE_URL"]
        env["REDIS_URL"] = os.environ["DIRECT_REDIS_URL"]
    env.update(extra_env or {})  # a test may route a worker through a proxy of its own
    queues = f"{os.environ['CELERY_QUEUE']},{os.environ['CELERY_QUEUE']}.sweep"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker",
        "worker",
        "--concurrency",
        str(concurrency),
        "--pool",
        "prefork",
        "--queues",
        queues,
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
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


def fetch_job(app: Flask, job_id: str) -> dict | None:
    """The job as the API shows it, or None; read in a session of its own."""
    from app.extensions import db
    from app.jobs.schemas import JobOut
    from app.jobs.service import get_job

    with app.app_context():
        job = get_job(job_id)
        data = JobOut().dump(job) if job is not None else None
        db.session.rollback()
        return data


def republish_abandoned(app, job_id: str) -> None:
    """What the outbox sweep does once the dead worker's lease has run out."""
    from app.db import transaction
    from app.extensions import db
    from app.jobs.models import Job
    from app.jobs.service import sweep_outbox

    with app.app_context():
        with transaction():
            job = db.session.get(Job, job_id)
            assert job.state == "running"
            job.lease_expires_at = started = job.started_at
        # Workers sweep on their own timer too: whichever sweep comes first re-publishes the job
        # (renewing its lease); one finding another sweep at work does nothing.
        deadline = time.monotonic() + 30
        while True:
            sweep_outbox()
            job = db.session.get(Job, job_id, populate_existing=True)
            state, lease = job.state, job.lease_expires_at
            db.session.rollback()
            if state != "running" or lease != started:
                return
            assert time.monotonic() < deadline, "the abandoned job was never re-published"
            time.sleep(0.2)
