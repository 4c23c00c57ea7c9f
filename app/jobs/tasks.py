"""Tasks of the job pipeline itself: the canary and the outbox sweep.

The sweep is requested by the beat and by every worker's own timer, so a stopped beat does not
stop recovery; the sweep's lock lets only one of the requests do the work at a time.
"""

from __future__ import annotations

import logging

from celery import bootsteps
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db import database_unreachable
from app.extensions import celery
from app.jobs import service
from app.jobs.runner import job_task

log = logging.getLogger(__name__)


@job_task("jobs.canary")
def canary(job):
    return service.run_canary(job)


@celery.task(name="jobs.sweep_outbox", ignore_result=True)
def sweep_outbox() -> int:
    try:
        return service.sweep_outbox()
    except (DBAPIError, PoolTimeout) as exc:
        if not database_unreachable(exc):
            raise
        # The next request sweeps again; an outage is logged once per request, not as a traceback.
        log.warning("outbox sweep skipped, the database is unreachable: %s", exc.__class__.__name__)
        return 0


def _sweep_options(interval: float) -> dict:
    # A request nobody took within two intervals is superseded by a newer one.
    return {"expires": max(2 * interval, 1.0)}


def request_sweep(interval: float) -> None:
    """Ask some worker for an outbox sweep; a broker that is down is logged, not raised."""
    try:
        sweep_outbox.apply_async(**_sweep_options(interval))
    except Exception as exc:
        log.warning("could not request an outbox sweep: %s", exc.__class__.__name__)


class OutboxSweepTimer(bootsteps.StartStopStep):
    """Every `OUTBOX_SWEEP_INTERVAL` seconds this worker requests an outbox sweep."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.timer_entry = None

    def start(self, worker) -> None:
        interval = float(celery.flask_app.config["OUTBOX_SWEEP_INTERVAL"])
        if interval > 0:
            self.timer_entry = worker.timer.call_repeatedly(interval, request_sweep, (interval,), priority=10)

    def stop(self, worker) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None


celery.steps["worker"].add(OutboxSweepTimer)


def beat_schedule(app) -> dict:
    interval = app.config["OUTBOX_SWEEP_INTERVAL"]
    return {
        "outbox-sweep": {"task": "jobs.sweep_outbox", "schedule": interval, "options": _sweep_options(interval)},
    }
