"""Liveness and readiness probes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from flask import Blueprint, current_app, jsonify
from sqlalchemy import text
from sqlalchemy.engine import Engine

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
    engine = db.engine
    broker_url = current_app.config["CELERY"]["broker_url"]
    deadline = time.monotonic() + float(current_app.config["READYZ_TIMEOUT"])
    futures = {
        "database": _probe("database", lambda: _check_database(engine)),
        "broker": _probe(f"broker:{broker_url}", lambda: _check_broker(broker_url)),
    }
    checks = {name: _outcome(name, future, deadline) for name, future in futures.items()}
    ready = all(value == "ok" for value in checks.values())
    body: dict = {"status": "ok" if ready else "unavailable", "checks": checks}
    if checks["database"] == "ok":
        body["queue"] = _queue_state()
    response = jsonify(body)
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = str(current_app.config["RETRY_AFTER_SECONDS"])
    return response


def _queue_state() -> dict:
    """Whether workers take jobs; it does not change readiness (web processes serve without them)."""
    try:
        age = queue_reader().oldest_queued_age_seconds()
    finally:
        db.session.rollback()
    consuming = age is None or age < float(current_app.config["JOB_STALL_SECONDS"])
    state: dict = {"oldest_queued_job_age_seconds": None if age is None else round(age, 1), "consuming": consuming}
    if not consuming:
        state["detail"] = (
            f"no worker has taken a queued job for {age:.0f} s; is a worker running (celery -A worker worker)?"
        )
    return state


def _probe(key: str, check: Callable[[], str]) -> Future:
    global _executor
    with _probe_lock:
        future = _probes.get(key)
        if future is None or future.done():
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readyz")
            future = _probes[key] = _executor.submit(check)
        return future


def _outcome(name: str, future: Future, deadline: float) -> str:
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        log.warning("readiness: %s did not answer in time", name)
        return "timeout"


def _check_database(engine: Engine) -> str:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return "ok"
    except Exception as exc:
        log.warning("readiness: database unreachable: %s", exc.__class__.__name__)
        return "unreachable"


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
