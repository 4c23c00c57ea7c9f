"""Typed settings: one frozen dataclass per feature, read once by `create_app`.

A feature declares its settings in `app/<feature>/settings.py`:

    @feature_settings
    @dataclass(frozen=True)
    class AgentSettings:
        chain_id: int = env("AGENT_CHAIN_ID", 1, "EIP-155 chain id of sign-in challenges.")

`create_app` builds every declared class once (`install_settings`): a value given to
`create_app(config=...)` wins, then the environment, then the default. Services and tasks read
`current(AgentSettings)`; nothing else reads `os.environ`. `declared_settings()` lists every
variable with its default and description (the settings table of docs/settings.md is tested against it).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from flask import Flask, current_app

T = TypeVar("T")

EXTENSION_KEY = "tessera.settings"
_DECLARED: list[type] = []
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Derived:
    """A default computed from the application config (e.g. a URL that defaults to `BASE_URL`)."""

    compute: Callable[[Mapping[str, Any]], Any]
    description: str

    def __repr__(self) -> str:
        return self.description


@dataclass(frozen=True)
class DeclaredSetting:
    """One environment variable of a feature, as the settings table of docs/settings.md lists it."""

    feature: str
    name: str
    default: Any
    doc: str


def env(name: str, default: Any, doc: str, *, parse: Callable[[str], Any] | None = None) -> Any:
    """A dataclass field read from the environment variable `name`.

    `parse` turns the variable's text into the value; without it the field's type (str, int,
    float, bool) does. `default` may be a `Derived`.
    """
    return field(default=default, metadata={"env": name, "doc": doc, "parse": parse})


def feature_settings(cls: type[T]) -> type[T]:
    """Register a settings dataclass so `create_app` builds it."""
    if cls not in _DECLARED:
        _DECLARED.append(cls)
    return cls


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a yes/no value (use 1/0, true/false, yes/no, on/off)")


def _convert(raw: Any, kind: Any, parse: Callable[[str], Any] | None) -> Any:
    if isinstance(raw, str):
        if parse is not None:
            return parse(raw)
        if kind is bool:
            return parse_bool(raw)
        if kind in (int, float):
            return kind(raw.strip())
        return raw
    if kind in (int, float) and not isinstance(raw, bool):
        return kind(raw)
    return raw


def load(cls: type[T], config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> T:
    """Build `cls` from `config` (values given to `create_app`), then `environ`, then defaults."""
    environ = os.environ if environ is None else environ
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for item in fields(cls):
        name = item.metadata.get("env")
        if name is None:
            continue
        raw = config.get(name)
        if raw is None or raw == "":
            raw = environ.get(name)
        if raw is None or raw == "":
            default = item.default if item.default is not MISSING else None
            values[item.name] = default.compute(config) if isinstance(default, Derived) else default
            continue
        try:
            values[item.name] = _convert(raw, hints.get(item.name), item.metadata.get("parse"))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: {error}") from error
    return cls(**values)


def _import_feature_settings() -> None:
    package_dir = Path(__file__).resolve().parent
    for feature in pkgutil.iter_modules([str(package_dir)]):
        if feature.ispkg and (package_dir / feature.name / "settings.py").exists():
            importlib.import_module(f"app.{feature.name}.settings")


def install_settings(app: Flask) -> None:
    """Build every feature's settings once from `app.config` and the environment."""
    _import_feature_settings()
    app.extensions[EXTENSION_KEY] = {cls: load(cls, app.config) for cls in _DECLARED}


def current(cls: type[T], app: Flask | None = None) -> T:
    """The settings object `cls` of the running application (built by `create_app`)."""
    return (app or current_app).extensions[EXTENSION_KEY][cls]


def declared_settings() -> Iterator[DeclaredSetting]:
    """Every environment variable a feature declares, with its default and description."""
    _import_feature_settings()
    for cls in _DECLARED:
        for item in fields(cls):
            if "env" in item.metadata:
                default = item.default if item.default is not MISSING else None
                yield DeclaredSetting(cls.__module__.split(".")[1], item.metadata["env"], default, item.metadata["doc"])
