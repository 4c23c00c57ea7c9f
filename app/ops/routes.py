"""Liveness and readiness probes."""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, jsonify
from sqlalchemy import text

from app.extensions import db
from app.jobs.service import oldest_queued_job_age_seconds

log = logging.getLogger(__name__)

blp = Blueprint("ops", __name__)


@blp.get("/healthz")
def healthz():
    """The process is up."""
    return jsonify(status="ok")


@blp.get("/readyz")
def readyz():
    """The database and the broker are reachable; 503 with `Retry-After` otherwise."""
    checks = {"database": _check_database(), "broker": _check_broker()}
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
        age = oldest_queued_job_age_seconds()
    finally:
        db.session.rollback()
    consuming = age is None or age < float(current_app.config["JOB_STALL_SECONDS"])
    state: dict = {"oldest_queued_job_age_seconds": None if age is None else round(age, 1), "consuming": consuming}
    if not consuming:
        state["detail"] = (
            f"no worker has taken a queued job for {age:.0f} s; is a worker running (celery -A worker worker)?"
        )
    return state


def _check_database() -> str:
    try:
        db.session.execute(text("SELECT 1"))
        db.session.rollback()
        return "ok"
    except Exception as exc:
        log.warning("readiness: database unreachable: %s", exc.__class__.__name__)
        try:
            db.session.rollback()
        except Exception:  # the connection is already gone
            log.debug("rollback failed", exc_info=True)
        return "unreachable"


def _check_broker() -> str:
    url = current_app.config["CELERY"]["broker_url"]
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
