"""Liveness and readiness probes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from flask import Blueprint, Flask, current_app, jsonify
from sqlalchemy import text

from app.extensions import db
from app.ops.queue import queue_reader

log = logging.getLogger(__name__)

blp = Blueprint("ops", __name__)

# A probe may block for as long as a network partition lasts (a socket read gets no answer), so it
# runs beside the request, which answers at its deadline. One probe per check at a time: a probe
# still stuck is waited on again rather than joined by another, so a partition pins at most one
# thread and one database connection per check.
_probe_lock = threading.Lock()
_probes: dict[str, Future] = {}
_executor: ThreadPoolExecutor | None = None


@blp.get("/healthz")
def healthz():
    """The process is up."""
    return jsonify(status="ok")


@blp.get("/readyz")
def readyz():
    """The database and the broker are reachable; 503 with `Retry-After` otherwise, within `READYZ_TIMEOUT`."""
    app = current_app._get_current_object()
    broker_url = app.config["CELERY"]["broker_url"]
    deadline = time.monotonic() + float(app.config["READYZ_TIMEOUT"])
    database = _probe("database", lambda: _check_database(app))
    broker = _probe(f"broker:{broker_url}", lambda: _check_broker(broker_url))
    database_status, queue = _outcome("database", database, deadline, ("timeout", None))
    checks = {"database": database_status, "broker": _outcome("broker", broker, deadline, "timeout")}
    ready = all(value == "ok" for value in checks.values())
    body: dict = {"status": "ok" if ready else "unavailable", "checks": checks}
    if queue is not None:
        body["queue"] = queue
    response = jsonify(body)
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = str(app.config["RETRY_AFTER_SECONDS"])
    return response


def _probe(key: str, check: Callable[[], object]) -> Future:
    global _executor
    with _probe_lock:
        future = _probes.get(key)
        if future is None or future.done():
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readyz")
            future = _probes[key] = _executor.submit(check)
        return future


def _outcome(name: str, future: Future, deadline: float, late):
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        log.warning("readiness: %s did not answer in time", name)
        return late


def _check_database(app: Flask) -> tuple[str, dict | None]:
    """("ok", the queue's state) when the database answers; ("unreachable", None) otherwise."""
    with app.app_context():
        try:
            db.session.execute(text("SELECT 1"))
            return "ok", _queue_state(app)
        except Exception as exc:
            log.warning("readiness: database unreachable: %s", exc.__class__.__name__)
            return "unreachable", None
        finally:
            try:
                db.session.rollback()
            except Exception:  # the connection is already gone
                log.debug("rollback failed", exc_info=True)


def _queue_state(app: Flask) -> dict:
    """Whether workers take jobs; it does not change readiness (web processes serve without them)."""
    age = queue_reader(app).oldest_queued_age_seconds()
    consuming = age is None or age < float(app.config["JOB_STALL_SECONDS"])
    state: dict = {"oldest_queued_job_age_seconds": None if age is None else round(age, 1), "consuming": consuming}
    if not consuming:
        state["detail"] = (
            f"no worker has taken a queued job for {age:.0f} s; is a worker running (celery -A worker worker)?"
        )
    return state


def _check_broker(url: str) -> str:
    try:
        if url.startswith(("redis://", "rediss://")):
            import redis

            client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
            try:
                client.ping()
            finally:
                client.close()
        else:
            from kombu import Connection

            with Connection(url, connect_timeout=1) as connection:
                connection.ensure_connection(max_retries=1)
        return "ok"
    except Exception as exc:
        log.warning("readiness: broker unreachable: %s", exc.__class__.__name__)
        return "unreachable"
