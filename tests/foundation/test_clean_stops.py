"""The Procfile's worker and beat stop within honcho's grace, and beat's INFO log says only what changes.

Each test runs the Procfile line on the embedded default (SQLite database and broker) of an instance
directory of its own, also with a Redis broker in the PostgreSQL + Redis run, and signals its process
group as honcho does on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.environment import REPO_ROOT

HONCHO_GRACE_SECONDS = 5.0
# Settings of this test run that would otherwise leak into the processes started here.
_RUN_SETTINGS = ("DATABASE_URL", "REDIS_URL", "DIRECT_DATABASE_URL", "DIRECT_REDIS_URL", "CELERY_ALWAYS_EAGER",
                 "CELERY_QUEUE", "BASE_URL", "PORT", "SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY",
                 "LOG_LEVEL")  # fmt: skip

_ENQUEUE = """
import sys
from app import create_app
from app.db import transaction
from app.jobs.service import start_canary
from tests.support.tenancy import make_master
app = create_app()
master = make_master(app)
with app.app_context(), transaction():
    job_id = start_canary(master.client_id, int(sys.argv[1])).id
print(job_id)
"""


def procfile_line(name: str) -> str:
    for line in (REPO_ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"Procfile has no {name} line")


@pytest.fixture(params=[pytest.param("embedded", marks=pytest.mark.embedded), "redis"])
def service_env(request, tmp_path: Path) -> dict[str, str]:
    """The embedded default, or its database with the Redis broker of a PostgreSQL + Redis run."""
    env = {name: value for name, value in os.environ.items() if name not in _RUN_SETTINGS}
    if request.param == "redis":
        if "DIRECT_REDIS_URL" not in os.environ:
            pytest.skip("Redis is used in the PostgreSQL + Redis run")
        env.update(REDIS_URL=os.environ["DIRECT_REDIS_URL"], CELERY_QUEUE=f"tessera-stops-{uuid.uuid4().hex[:8]}")
    # DEBUG: the worker logs when it receives a job (a job's claim commits with its effect, unseen until then).
    env.update(TESSERA_INSTANCE_DIR=str(tmp_path / "instance"), WORKER_CONCURRENCY="1", PYTHONPATH=str(REPO_ROOT),
               LOG_LEVEL="DEBUG",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    migrated = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"], cwd=REPO_ROOT,
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    return env


def _enqueue_canary(env: dict[str, str], delay_ms: int) -> subprocess.Popen:
    """Start a canary job from a process of its own: it may take a while to exit after its publish."""
    return subprocess.Popen([sys.executable, "-c", _ENQUEUE, str(delay_ms)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip


def _job_id(enqueuer: subprocess.Popen) -> str:
    out, _ = enqueuer.communicate(timeout=60)
    assert enqueuer.returncode == 0
    return out.strip().splitlines()[-1]


def _start(name: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as output:
        return subprocess.Popen(["bash", "-c", procfile_line(name)], cwd=REPO_ROOT, env=env, stdout=output,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def _wait_for_log(log: Path, text: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def _stop_as_honcho(process: subprocess.Popen) -> float:
    """SIGTERM to the process group; seconds until the process ended (SIGKILL after the grace, as honcho)."""
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=HONCHO_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        return float("inf")
    return time.monotonic() - started


def _job(env: dict[str, str], job_id: str) -> dict:
    """The job's state and its canary's runs, read from the embedded database (quick enough to poll)."""
    with contextlib.closing(sqlite3.connect(Path(env["TESSERA_INSTANCE_DIR"]) / "tessera.sqlite")) as database:
        (state,) = database.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        (runs,) = database.execute("SELECT count(*) FROM canary_runs WHERE job_id = ?", (job_id,)).fetchone()
    return {"state": state, "runs": runs}


def _wait_for_state(env: dict[str, str], job_id: str, states: set[str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while (job := _job(env, job_id))["state"] not in states:
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    return job


def test_idle_worker_stops_within_the_grace(service_env, tmp_path):
    log = tmp_path / "worker.log"
    worker = _start("worker", service_env, log)
    _wait_for_log(log, "ready", worker)
    assert _stop_as_honcho(worker) < HONCHO_GRACE_SECONDS, log.read_text()[-3000:]


def test_worker_stopped_mid_job_returns_it_to_the_queue_and_it_runs_once(service_env, tmp_path):
    service_env["JOB_LEASE_SECONDS"] = "10"  # the claim of the interrupted run expires sooner
    log = tmp_path / "worker.log"
    worker = _start("worker", service_env, log)
    _wait_for_log(log, "ready", worker)
    enqueuer = _enqueue_canary(service_env, 6000)  # longer than the worker's shutdown allowance
    _wait_for_log(log, "jobs.canary[", worker)
    time.sleep(0.5)
    assert _stop_as_honcho(worker) < HONCHO_GRACE_SECONDS, log.read_text()[-3000:]
    job_id = _job_id(enqueuer)
    assert _job(service_env, job_id) == {"state": "running", "runs": 0}, "the interrupted run left no effect"
    # Delivered again at once; run again once the interrupted run's claim (its lease) has expired.

    again = _start("worker", service_env, tmp_path / "worker-again.log")
    try:
        assert _wait_for_state(service_env, job_id, {"succeeded", "failed"}, timeout=90) == {
            "state": "succeeded", "runs": 1,
        }  # fmt: skip
    finally:
        _stop_as_honcho(again)


def test_worker_stopped_during_a_short_job_lets_it_finish(service_env, tmp_path):
    log = tmp_path / "worker.log"
    worker = _start("worker", service_env, log)
    _wait_for_log(log, "ready", worker)
    enqueuer = _enqueue_canary(service_env, 1200)  # ends within the worker's WORKER_SHUTDOWN_SECONDS (1.5)
    _wait_for_log(log, "jobs.canary[", worker)
    assert _stop_as_honcho(worker) < HONCHO_GRACE_SECONDS, log.read_text()[-3000:]
    job_id = _job_id(enqueuer)
    assert _job(service_env, job_id) == {"state": "succeeded", "runs": 1}


def test_beat_logs_no_routine_sends_at_info_and_stops_within_the_grace(service_env, tmp_path):
    log = tmp_path / "beat.log"
    beat = _start("beat", {**service_env, "OUTBOX_SWEEP_INTERVAL": "1", "LOG_LEVEL": "INFO"}, log)
    _wait_for_log(log, "beat: Starting", beat)
    time.sleep(4)  # four sweeps sent
    assert _stop_as_honcho(beat) < HONCHO_GRACE_SECONDS, log.read_text()[-3000:]
    text = log.read_text()
    assert "Sending due task" not in text, text[-3000:]
