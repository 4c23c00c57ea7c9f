"""Operator commands (`flask --app app ...`) run as an operator would: in a subprocess, from anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import REPO_ROOT, USING_POSTGRES

FLASK = [sys.executable, "-m", "flask", "--app", "app"]


def _env(**overrides: str | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {"REDIS_URL", "CELERY_BROKER_URL"}}
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def unmigrated_env(tmp_path: Path) -> dict[str, str]:
    return _env(
        TESSERA_INSTANCE_DIR=str(tmp_path / "instance"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'empty.sqlite'}",
        CELERY_ALWAYS_EAGER="1",
    )


def test_commands_find_the_checkout_instance_from_any_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _env(
        TESSERA_INSTANCE_DIR=None,
        DATABASE_URL=None,
        SECRET_KEY="test-secret-key",
        ENCRYPTION_KEYS="test-encryption-key",
        SECRET_HASH_KEY="test-secret-hash-key",
    )
    probe = "from app.config import INSTANCE_DIR, database_url; print(INSTANCE_DIR); print(database_url())"
    first = _run([sys.executable, "-c", probe], cwd=elsewhere, env=env)
    second = _run([sys.executable, "-c", probe], cwd=REPO_ROOT / "tests", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert first.stdout.splitlines()[0] == str(REPO_ROOT / "instance")

    listed = _run([*FLASK, "clients", "list", "--json"], cwd=elsewhere, env=env)
    # Whether or not the checkout's database is migrated, the command used it, never one in the cwd.
    assert listed.returncode == 0 or "flask --app app db upgrade" in listed.stderr, listed.stderr
    assert "Traceback" not in listed.stderr
    assert list(elsewhere.iterdir()) == []


def test_flask_commands_on_an_unmigrated_database_name_the_fix(tmp_path: Path, unmigrated_env) -> None:
    address = "0x" + "1" * 40
    for args in (["clients", "list"], ["outbox", "sweep"], ["keys", "list"], ["agents", "set-kind", address, "agent"]):
        result = _run([*FLASK, *args], cwd=tmp_path, env=unmigrated_env)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "run `flask --app app db upgrade`" in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


# Runs in its own process: every operator command of the application, each with placeholder
# arguments, against a database that was never migrated.
_EVERY_COMMAND = r"""
import json, click
from app import create_app
app = create_app()
runner = app.test_cli_runner()

def placeholder(param):
    if isinstance(param.type, click.Choice):
        return str(param.type.choices[0])
    if isinstance(param.type, click.types.IntParamType | click.types.FloatParamType):
        return "1"
    return "0x" + "1" * 40

def leaves(group, path):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaves(command, [*path, name])
        else:
            yield [*path, name], command

results = {}
for group in ("clients", "outbox", "keys", "agents"):
    for path, command in leaves(app.cli.commands[group], [group]):
        args = list(path)
        for param in command.params:
            if param.required:
                if isinstance(param, click.Option):
                    args.append(param.opts[0])
                    if param.is_flag:  # a required on/off switch: its first spelling alone
                        continue
                args.append(placeholder(param))
        result = runner.invoke(args=args)
        results[" ".join(path)] = [result.exit_code, result.output, repr(result.exception)]
print(json.dumps(results))
"""


def test_every_operator_command_on_an_unmigrated_database_names_the_fix(tmp_path: Path, unmigrated_env) -> None:
    result = _run([sys.executable, "-c", _EVERY_COMMAND], cwd=tmp_path, env=unmigrated_env)
    assert result.returncode == 0, result.stderr
    outcomes = json.loads(result.stdout.splitlines()[-1])
    expected = {"clients create-master", "clients tokens create", "outbox sweep", "keys rotate", "agents grant-credits"}
    assert set(outcomes) >= expected
    for command, (exit_code, output, _exception) in outcomes.items():
        assert exit_code == 1 and "run `flask --app app db upgrade`" in output, (command, exit_code, output)


def test_flask_commands_print_no_warnings(tmp_path: Path, unmigrated_env) -> None:
    env = {key: value for key, value in unmigrated_env.items() if key != "DEV_OUTBOX"}  # on purpose it warns
    result = _run([*FLASK, "--help"], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr and result.stderr.strip() == "", result.stderr


def test_operator_commands_on_a_migrated_database_print_nothing_on_stderr(tmp_path: Path, unmigrated_env) -> None:
    # As an operator runs them: the default log level (the test run's LOG_LEVEL=WARNING would hide
    # INFO lines), every warning shown, DEV_OUTBOX off (on purpose it warns).
    env = {key: value for key, value in unmigrated_env.items() if key not in {"DEV_OUTBOX", "LOG_LEVEL"}}
    env["PYTHONWARNINGS"] = "default"
    upgraded = _run([*FLASK, "db", "upgrade"], cwd=tmp_path, env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    for args in (["clients", "list"], ["keys", "list"], ["outbox", "sweep"]):
        result = _run([*FLASK, *args], cwd=tmp_path, env=env)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stderr == "", (args, result.stderr)


_IMPORT_EVERYTHING = """
import importlib, pkgutil
import httpx, requests
import app, worker
from app import create_app
create_app()
for module in pkgutil.walk_packages(app.__path__, "app."):
    importlib.import_module(module.name)
print("imported")
"""


def test_the_application_and_its_http_clients_import_without_a_warning(tmp_path: Path, unmigrated_env) -> None:
    # Every warning is an error here: a deprecation of an HTTP client library (or any other) would
    # otherwise be printed by each `flask` command and pile up in pytest's summary.
    env = {key: value for key, value in unmigrated_env.items() if key != "DEV_OUTBOX"}
    result = _run([sys.executable, "-W", "error", "-c", _IMPORT_EVERYTHING], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported"


TESSERA_ADMIN = [sys.executable, "-c", "import sys; from app.admin import main; sys.exit(main())"]


def test_tessera_admin_says_tesseras_version_and_lists_only_its_commands(tmp_path: Path, unmigrated_env) -> None:
    import tomllib

    package_version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    shown = _run([*TESSERA_ADMIN, "--version"], cwd=tmp_path, env=unmigrated_env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"tessera-admin {package_version}\n"

    listed = _run([*TESSERA_ADMIN, "--help"], cwd=tmp_path, env=unmigrated_env)
    assert listed.returncode == 0, listed.stderr
    commands = {line.split()[0] for line in listed.stdout.split("Commands:\n", 1)[1].splitlines() if line.strip()}
    assert commands == {"agents", "chain", "clients", "db", "keys", "outbox", "users"}
    for foreign in ("run", "shell", "routes", "limiter", "openapi"):
        refused = _run([*TESSERA_ADMIN, foreign], cwd=tmp_path, env=unmigrated_env)
        assert refused.returncode == 2 and f"No such command '{foreign}'" in refused.stderr, (foreign, refused.stderr)


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _operator_mistakes(tmp_path: Path) -> dict[str, str]:
    """DATABASE_URL values an operator gets wrong, each the run can make: nothing listens, not a URL,
    a database that does not exist."""
    mistakes = {
        "nothing listens": f"postgresql://tessera:hunter2@127.0.0.1:{_closed_port()}/tessera",
        "not a database URL": "nonsense://",
        "another database product": "mysql://tessera@127.0.0.1/tessera",
        "a directory that does not exist": f"sqlite:///{tmp_path / 'missing' / 'tessera.sqlite'}",
    }
    if USING_POSTGRES:
        from sqlalchemy.engine import make_url

        never_created = make_url(os.environ["DATABASE_URL"]).set(database="tessera_never_created")
        mistakes["a database that does not exist"] = never_created.render_as_string(hide_password=False)
    return mistakes


def test_operator_mistakes_in_database_url_end_in_one_line_naming_it(tmp_path: Path, unmigrated_env) -> None:
    secrets = {name: "operator-secret" for name in ("SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY")}
    for mistake, url in _operator_mistakes(tmp_path).items():
        env = {**{k: v for k, v in unmigrated_env.items() if k != "DEV_OUTBOX"}, **secrets, "DATABASE_URL": url}
        for args in (["db", "upgrade"], ["clients", "list"]):
            for command in (TESSERA_ADMIN, FLASK):
                result = _run([*command, *args], cwd=tmp_path, env=env)
                lines = [line for line in result.stderr.splitlines() if line.strip()]
                assert result.returncode != 0, (mistake, args, result.stdout)
                assert len(lines) == 1 and "DATABASE_URL" in lines[0], (mistake, args, result.stderr)
                assert "hunter2" not in result.stderr
