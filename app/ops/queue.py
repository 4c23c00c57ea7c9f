"""How ops reads the job queue without importing the jobs feature.

`create_app` registers a `QueueReader` (the jobs feature's read functions); the metrics collector and
the readiness probe call it. Both functions run inside an application context and only read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import Flask, current_app

_EXTENSION = "ops_queue_reader"


@dataclass(frozen=True)
class QueueReader:
    """`counts_by_state()`: jobs per state; `oldest_queued_age_seconds()`: None when nothing waits."""

    counts_by_state: Callable[[], dict[str, int]]
    oldest_queued_age_seconds: Callable[[], float | None]


def register_queue_reader(app: Flask, reader: QueueReader) -> None:
    app.extensions[_EXTENSION] = reader


def queue_reader(app: Flask | None = None) -> QueueReader:
    return (app or current_app).extensions[_EXTENSION]
