"""The typed settings mechanism: precedence, conversion, derived defaults and clear errors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.settings import Derived, env, load


@dataclass(frozen=True)
class ExampleSettings:
    chain_id: int = env("EXAMPLE_CHAIN_ID", 1, "A number.")
    timeout: float = env("EXAMPLE_TIMEOUT", 2.5, "Seconds.")
    enabled: bool = env("EXAMPLE_ENABLED", False, "A switch.")
    url: str = env("EXAMPLE_URL", Derived(lambda config: config["BASE_URL"] + "/x", "BASE_URL/x"), "A URL.")
    hosts: frozenset = env("EXAMPLE_HOSTS", frozenset(), "Hosts.", parse=lambda text: frozenset(text.split(",")))


def test_defaults_apply_when_nothing_is_set() -> None:
    settings = load(ExampleSettings, {"BASE_URL": "http://h"}, {})
    assert settings == ExampleSettings(1, 2.5, False, "http://h/x", frozenset())


def test_environment_text_is_converted_by_type_or_parser() -> None:
    environ = {
        "EXAMPLE_CHAIN_ID": "7",
        "EXAMPLE_TIMEOUT": "0.5",
        "EXAMPLE_ENABLED": "yes",
        "EXAMPLE_URL": "https://u",
        "EXAMPLE_HOSTS": "a,b",
    }
    settings = load(ExampleSettings, {"BASE_URL": "http://h"}, environ)
    assert settings == ExampleSettings(7, 0.5, True, "https://u", frozenset({"a", "b"}))


def test_application_config_wins_over_the_environment() -> None:
    settings = load(ExampleSettings, {"BASE_URL": "http://h", "EXAMPLE_CHAIN_ID": 9}, {"EXAMPLE_CHAIN_ID": "7"})
    assert settings.chain_id == 9


def test_a_malformed_value_names_its_variable() -> None:
    with pytest.raises(ValueError, match="EXAMPLE_ENABLED"):
        load(ExampleSettings, {"BASE_URL": "http://h"}, {"EXAMPLE_ENABLED": "maybe"})
