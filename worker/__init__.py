"""The Celery application: `celery -A worker worker` / `celery -A worker beat`.

Task modules live beside this file, one per feature; `create_app` imports all of them. The
Flask application is built lazily, when Celery asks for `worker.celery`, so importing a task
module has no side effects.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name in {"celery", "app"}:
        from app import create_app
        from app.serving import freeze_start_up_objects

        celery = create_app().extensions["celery"]
        freeze_start_up_objects()  # before the pool forks: full collections stay short in every process
        return celery
    raise AttributeError(name)
