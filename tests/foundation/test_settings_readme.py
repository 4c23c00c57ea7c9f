"""The README's settings table lists every declared variable with its default, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from app.settings import declared_settings
from tests.support.settings_table import BEGIN, END, README, readme_rows, row

APP_DIR = Path(__file__).resolve().parents[2] / "app"


def _declares_settings(feature: str) -> bool:
    return feature == "core" or (APP_DIR / feature / "settings.py").exists()


def test_the_readme_table_matches_the_declared_settings() -> None:
    expected = {setting.name: row(setting) for setting in declared_settings()}
    listed = readme_rows(README.read_text())
    # A feature whose settings are not declared yet (no app/<feature>/settings.py) keeps its rows.
    for name, (feature, _line) in list(listed.items()):
        assert feature == "core" or (APP_DIR / feature).is_dir(), f"{name}: no feature {feature!r}"
        if not _declares_settings(feature):
            del listed[name]
    missing = sorted(set(expected) - set(listed))
    stale = sorted(set(listed) - set(expected))
    assert not missing and not stale, (
        f"README settings table: missing {missing}, stale {stale}; run `python -m tests.support.settings_table`"
    )
    differing = [expected[name] for name in expected if listed[name][1] != expected[name]]
    assert not differing, f"README rows out of date (run `python -m tests.support.settings_table`): {differing}"


def test_no_declared_variable_is_also_listed_outside_the_generated_table() -> None:
    text = README.read_text()
    before, rest = text.split(BEGIN, 1)
    outside = before + rest.split(END, 1)[1]
    declared = {setting.name for setting in declared_settings()}
    first_cells = [line.split("|")[1] for line in outside.splitlines() if line.startswith("| `")]
    listed_twice = sorted(declared & {name for cell in first_cells for name in re.findall(r"`([A-Z0-9_]+)`", cell)})
    assert not listed_twice, f"declared, so listed in the generated table only: {listed_twice}"
