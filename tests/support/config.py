"""Change an application's config for the length of a test, rebuilding its typed settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask

from app.settings import install_settings

_ABSENT = object()


@contextmanager
def config_changed(app: Flask, **values: Any) -> Iterator[None]:
    """Set `values` in `app.config` and rebuild the settings; restore both on exit."""
    before = {name: app.config.get(name, _ABSENT) for name in values}
    app.config.update(values)
    install_settings(app)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is _ABSENT:
                app.config.pop(name, None)
            else:
                app.config[name] = value
        install_settings(app)
