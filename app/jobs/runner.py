"""`job_task`: an idempotent, late-acknowledged Celery task running one job handler."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from celery.exceptions import Retry
from flask import current_app, has_app_context
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db import database_unreachable
from app.extensions import celery
from app.jobs.models import Job
from app.jobs.service import fail_job, run_job
from app.ops.logging import request_id_var

log = logging.getLogger(__name__)

MAX_RETRIES = 5  # `JOB_MAX_RETRIES`'s default
MAX_BACKOFF_SECONDS = 300
OUTAGE_BACKOFF_SECONDS = 5.0
# Attempts at writing the final "failed" state that the database refuses, beyond the job's retries;
# while it is unreachable the write is retried without limit.
SETTLE_RETRIES = 50


class TransientError(Exception):
    """A fault worth retrying with backoff (network hiccup, dependency briefly down)."""


class RetryLater(Exception):
    """Re-schedule the task after `seconds` (a rate limit's reset hint) without counting a failure."""

    def __init__(self, seconds: float, reason: str = "") -> None:
        super().__init__(reason or f"retry in {seconds:.1f}s")
        self.seconds = max(0.0, seconds)


def backoff_seconds(retries: int) -> float:
    """Exponential backoff with full jitter: up to 2^retries seconds, capped (`JOB_RETRY_BACKOFF_MAX`)."""
    cap = MAX_BACKOFF_SECONDS
    if has_app_context():
        cap = current_app.config.get("JOB_RETRY_BACKOFF_MAX", MAX_BACKOFF_SECONDS)
    return random.uniform(0, min(cap, 2 ** min(retries, 32)))


def outage_backoff_seconds(retries: int) -> float:
    """Backoff while the database is unreachable: up to 2^retries seconds, capped low
    (`JOB_OUTAGE_RETRY_MAX`) so a job runs within seconds of the database's return."""
    cap = OUTAGE_BACKOFF_SECONDS
    if has_app_context():
        cap = current_app.config.get("JOB_OUTAGE_RETRY_MAX", OUTAGE_BACKOFF_SECONDS)
    return random.uniform(0, min(cap, 2 ** min(retries, 32)))


def configured_retries() -> int:
    """How many transient failures of a handler a job retries (`JOB_MAX_RETRIES`)."""
    if has_app_context():
        return int(current_app.config.get("JOB_MAX_RETRIES", MAX_RETRIES))
    return MAX_RETRIES


def counts_against_retries(task, error: BaseException) -> bool:
    """A handler's failure uses up one of the job's retries; an unreachable database never does.

    A job accepted with 202 runs once the database is back, however long it was away. An eager
    run (tests) has no broker to wait in, so there every failure counts.
    """
    return task.request.is_eager or not database_unreachable(error)


def job_task(
    name: str,
    *,
    max_retries: int | None = None,
    max_attempts: int | None = None,
    transient: tuple[type[Exception], ...] = (),
    deferred: tuple[type[Exception], ...] = (),
) -> Callable:
    """Turn `handler(job) -> result` into the Celery task `name` that takes a job id.

    `max_retries` (unset: `JOB_MAX_RETRIES`) counts the handler's transient failures only
    (`failures`, carried from retry to retry); a database outage is retried with a short capped
    backoff, without counting. `max_attempts` (see `run_job`) fails a job started more often than
    that, for handlers that must never be run over and over (e.g. work that may outlive the job's
    lease). `transient`:
    exceptions retried like `TransientError`; `deferred`: exceptions with `seconds`, re-scheduled
    like `RetryLater`. Both may come from a `CallOutside`, which runs outside the handler.
    """
    retried = (TransientError, DBAPIError, PoolTimeout, *transient)
    later = (RetryLater, *deferred)

    def decorator(handler: Callable[[Job], dict | None]):
        @celery.task(name=name, bind=True, acks_late=True, max_retries=None, ignore_result=True)
        def task(
            self, job_id: str, request_id: str | None = None, give_up: dict | None = None, failures: int = 0
        ) -> None:
            token = request_id_var.set(request_id)
            retries = configured_retries() if max_retries is None else max_retries
            try:
                if give_up is not None:
                    settle_failed(self, job_id, request_id, give_up, retries + SETTLE_RETRIES)
                    return
                run_job(job_id, handler, max_attempts=max_attempts)
                log.debug("job %s (%s) done", job_id, name, extra={"job_id": job_id, "job_kind": name})
            except later as delay:
                log.debug("job %s rescheduled in %.1fs: %s", job_id, delay.seconds, delay)
                raise self.retry(countdown=delay.seconds) from None
            except retried as exc:
                kwargs = {"request_id": request_id, "failures": failures}
                if not counts_against_retries(self, exc):
                    countdown = outage_backoff_seconds(self.request.retries + 1)
                    log.warning("job %s: database unreachable, retry in %.1fs (not counted): %s", job_id, countdown,
                                exc.__class__.__name__)  # fmt: skip
                    raise self.retry(countdown=countdown, kwargs=kwargs) from None
                if failures >= retries:
                    log.error("job %s gave up after %d retries: %s", job_id, failures, exc)
                    error = {"code": "retries_exhausted", "detail": str(exc)[:500]}
                    settle_failed(self, job_id, request_id, error, retries + SETTLE_RETRIES)
                    return
                countdown = backoff_seconds(failures + 1)
                log.warning("job %s transient failure, retry in %.1fs: %s", job_id, countdown, exc)
                raise self.retry(countdown=countdown, kwargs={**kwargs, "failures": failures + 1}) from None
            except Retry:
                raise
            finally:
                request_id_var.reset(token)

        task.handler = handler
        return task

    return decorator


def settle_failed(task, job_id: str, request_id: str | None, error: dict, limit: int) -> None:
    """Record the job as failed; if the database refuses, retry that write alone until it lands.

    The retry carries the verdict (`give_up`), so the handler never runs again for this job.
    """
    try:
        fail_job(job_id, error)
    except (DBAPIError, PoolTimeout) as exc:
        outage = not counts_against_retries(task, exc)
        if task.request.retries >= limit and not outage:
            log.error("job %s: its failure could not be recorded, the sweep will re-run it: %s", job_id, exc)
            raise
        retries = task.request.retries + 1
        countdown = outage_backoff_seconds(retries) if outage else backoff_seconds(min(retries, 8))
        log.warning("job %s: recording its failure failed, retry in %.1fs: %s", job_id, countdown, exc)
        raise task.retry(countdown=countdown, kwargs={"request_id": request_id, "give_up": error}) from None
