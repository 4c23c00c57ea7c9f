"""The Celery application: `celery -A worker worker` / `celery -A worker beat`.

The entry point only: tasks live in their features (`app/<feature>/tasks.py`, thin tasks calling
services), and `create_app` imports all of them. The Flask application is built lazily, when
Celery asks for `worker.celery`, so importing this package has no side effects.
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
