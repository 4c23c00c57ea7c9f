"""docs/settings.md lists every declared variable with its default (a generated table), and every variable
read outside the declarations."""

from __future__ import annotations

import re
from pathlib import Path

from app.settings import declared_settings
from tests.support.settings_table import BEGIN, END, SETTINGS_DOC, documented_rows, row

APP_DIR = Path(__file__).resolve().parents[2] / "app"
REPO = APP_DIR.parent
# Variables read straight from the environment (not declared settings): os.environ, os.getenv, click's envvar.
_RAW_READ = re.compile(
    r"""os\.(?:environ\.get\(|environ\[|getenv\()\s*["']([A-Z][A-Z0-9_]*)["']|envvar=["']([A-Z][A-Z0-9_]*)["']"""
)


def _declares_settings(feature: str) -> bool:
    return feature == "core" or (APP_DIR / feature / "settings.py").exists()


def test_the_table_matches_the_declared_settings() -> None:
    expected = {setting.name: row(setting) for setting in declared_settings()}
    listed = documented_rows(SETTINGS_DOC.read_text())
    # A feature whose settings are not declared yet (no app/<feature>/settings.py) keeps its rows.
    for name, (feature, _line) in list(listed.items()):
        assert feature == "core" or (APP_DIR / feature).is_dir(), f"{name}: no feature {feature!r}"
        if not _declares_settings(feature):
            del listed[name]
    missing = sorted(set(expected) - set(listed))
    stale = sorted(set(listed) - set(expected))
    assert not missing and not stale, (
        f"docs/settings.md table: missing {missing}, stale {stale}; run `python -m tests.support.settings_table`"
    )
    differing = [expected[name] for name in expected if listed[name][1] != expected[name]]
    assert not differing, f"docs/settings.md: stale rows (run `python -m tests.support.settings_table`): {differing}"


def test_no_declared_variable_is_also_listed_outside_the_generated_table() -> None:
    text = SETTINGS_DOC.read_text()
    before, rest = text.split(BEGIN, 1)
    outside = before + rest.split(END, 1)[1]
    declared = {setting.name for setting in declared_settings()}
    first_cells = [line.split("|")[1] for line in outside.splitlines() if line.startswith("| `")]
    listed_twice = sorted(declared & {name for cell in first_cells for name in re.findall(r"`([A-Z0-9_]+)`", cell)})
    assert not listed_twice, f"declared, so listed in the generated table only: {listed_twice}"


def _service_section(text: str) -> str:
    return text.split("## The service", 1)[1].split("\n## ", 1)[0]


def _raw_reads(files: list[Path]) -> set[str]:
    return {name for path in files for match in _RAW_READ.finditer(path.read_text()) for name in match.groups() if name}


def test_every_variable_read_outside_the_declarations_is_documented() -> None:
    text = SETTINGS_DOC.read_text()
    service_section = _service_section(text)
    client_dir = APP_DIR / "client"
    service_files = [
        path for path in [*APP_DIR.rglob("*.py"), *(REPO / "worker").rglob("*.py")] if client_dir not in path.parents
    ]
    service = _raw_reads(service_files) | set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (REPO / "Procfile").read_text()))
    client = _raw_reads(list(client_dir.rglob("*.py")))
    assert {"TESSERA_INSTANCE_DIR", "PORT", "WEB_CONCURRENCY"} <= service  # the scan sees them
    missing = sorted(name for name in service if f"`{name}`" not in service_section)
    assert not missing, f"read by the service, not in docs/settings.md's service section: {missing}"
    missing = sorted(name for name in client if f"`{name}`" not in text)
    assert not missing, f"read by the tessera command line, not in docs/settings.md: {missing}"


def test_the_table_lists_the_safety_settings() -> None:
    listed = documented_rows(SETTINGS_DOC.read_text())
    for name in ("BASE_URL", "PORT", "TRUSTED_PROXIES", "AGENT_NETWORK", "DEV_OUTBOX", "SECRET_KEY",
                 "ENCRYPTION_KEYS", "SECRET_HASH_KEY", "DATABASE_URL", "REDIS_URL", "JSONLD_CONTEXTS_DIR"):  # fmt: skip
        assert name in listed, name
