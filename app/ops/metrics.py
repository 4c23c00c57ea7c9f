"""Prometheus metrics: request latency and status codes, job durations and queue depth.

With `PROMETHEUS_MULTIPROC_DIR` set (several web worker processes, Celery workers on the same
host) the figures of every process are aggregated at scrape time. Scrapes present
`Authorization: Bearer <METRICS_TOKEN>`; without a token configured only the loopback interface
(an agent on the host) may scrape.
"""

from __future__ import annotations

import hmac
import os

from flask import Flask, Response, current_app, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

from app.extensions import db
from app.http import is_loopback_client
from app.ops.queue import queue_reader

JOB_DURATION = Histogram(
    "tessera_job_duration_seconds",
    "Time from a job being queued to it being final",
    ["kind", "state"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class QueueDepthCollector:
    """Reads the number of jobs per state from the database at scrape time."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def collect(self):
        gauge = GaugeMetricFamily("tessera_jobs", "Jobs by state (queue depth)", labels=["state"])
        oldest = GaugeMetricFamily(
            "tessera_jobs_oldest_queued_age_seconds", "Seconds the oldest queued job has waited (0 when none)"
        )
        reader = queue_reader(self.app)
        try:
            with self.app.app_context():
                for state, count in reader.counts_by_state().items():
                    gauge.add_metric([state], count)
                oldest.add_metric([], reader.oldest_queued_age_seconds() or 0.0)
                db.session.rollback()
        except Exception:  # a scrape during a database outage still answers with the rest
            return
        yield gauge
        yield oldest


def init_metrics(app: Flask) -> None:
    """Expose `/metrics` (the request metrics are kept by app/web/edge.py)."""
    queue_registry = CollectorRegistry()
    queue_registry.register(QueueDepthCollector(app))
    # Not an application setting: prometheus_client itself reads PROMETHEUS_MULTIPROC_DIR from the
    # process environment (at import, to decide where every metric's values live), so `/metrics`
    # must follow that same variable; a `create_app(config=...)` value could only contradict it.
    multiprocess_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")

    @app.get("/metrics")
    def metrics() -> Response:
        _authorize_scrape()
        if multiprocess_dir:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            body = generate_latest(registry)
        else:
            from prometheus_client import REGISTRY

            body = generate_latest(REGISTRY)
        body += generate_latest(queue_registry)
        return Response(body, mimetype=CONTENT_TYPE_LATEST)


def _authorize_scrape() -> None:
    """Let the scrape through, or raise `Unauthorized` (wrong or missing token) / `Forbidden`."""
    from app.errors import Forbidden, Unauthorized

    token = current_app.config.get("METRICS_TOKEN") or ""
    if token:
        scheme, _, supplied = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(supplied.strip().encode(), token.encode()):
            raise Unauthorized("Metrics need the bearer token set as METRICS_TOKEN.", scheme="Bearer")
        return
    if not is_loopback_client(request.remote_addr):
        raise Forbidden("Metrics are served to the loopback interface only unless METRICS_TOKEN is set.")
