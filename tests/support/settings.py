"""Changing settings in a test: `app.config` and the typed settings `create_app` built from it."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from flask import Flask

from app.settings import EXTENSION_KEY, install_settings


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
