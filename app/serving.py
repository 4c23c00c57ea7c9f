"""The application as a long-running process serves it: the Procfile's granian factory and the worker's app."""

from __future__ import annotations

import gc

from flask import Flask

from app import create_app
from app.config import record_served_address
from app.web.hot import HotLayer


def web_app() -> Flask:
    """`create_app()` for the web server (`granian --factory app.serving:web_app`): its own access
    log in front, start-up objects frozen; where it serves recorded for operator commands."""
    application = create_app()
    HotLayer.of(application).access_log = True
    record_served_address(application.config)
    freeze_start_up_objects()
    return application


def freeze_start_up_objects() -> None:
    """Put every object built so far (the application, its modules, schemas and statements, some
    200,000 of them, alive as long as the process) out of the garbage collector's sight.

    A full collection walks every tracked object: about 50 ms over those, a stall of every request
    the process holds when it happens (the long tail of the latency). Frozen, it takes well under
    a millisecond; a process that forks after this keeps those pages shared, too.
    """
    gc.collect()
    gc.freeze()
