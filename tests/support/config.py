"""Change an application's config for the length of a test, rebuilding its typed settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

import pytest
from flask import Flask

from app.settings import EXTENSION_KEY, install_settings

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


def set_settings(app: Flask, **values: Any) -> None:
    """Put `values` into `app.config` and rebuild every feature's settings from it."""
    app.config.update(values)
    install_settings(app)


def change_settings(monkeypatch: pytest.MonkeyPatch, app: Flask, **values: Any) -> None:
    """Like `set_settings` until the test ends (monkeypatch restores the config and the settings)."""
    for name, value in values.items():
        monkeypatch.setitem(app.config, name, value)
    monkeypatch.setitem(app.extensions, EXTENSION_KEY, app.extensions[EXTENSION_KEY])
    install_settings(app)


def setting_of(app: Flask, name: str) -> Any:
    """The value of the declared variable `name` in the settings `create_app` built."""
    for settings in app.extensions[EXTENSION_KEY].values():
        for item in fields(settings):
            if item.metadata.get("env") == name:
                return getattr(settings, item.name)
    raise KeyError(f"{name} is not a declared setting")
