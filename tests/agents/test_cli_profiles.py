"""`tessera login` keeps the key per network, owner-only; the help says the exit codes; `tessera-admin`
runs Tessera's operator commands even beside a local `app.py`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from app.agents.ethereum import address_from_private_key, generate_private_key
from app.client.cli import main
from tests.support.environment import REPO_ROOT


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def test_login_stores_the_key_owner_only_and_whoami_uses_it(runner, config_home, live_server, claimed_key):
    env = {"TESSERA_NETWORK_URL": live_server.url}
    login = runner.invoke(main, ["login", "--env", "testnet"], input=claimed_key + "\n", env=env)
    assert login.exit_code == 0, login.output
    assert claimed_key not in login.output
    credentials = config_home / "tessera" / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert stat.S_IMODE(credentials.parent.stat().st_mode) == 0o700

    whoami = runner.invoke(main, ["whoami", "--json"], env=env)
    assert whoami.exit_code == 0, whoami.output
    assert json.loads(whoami.stdout)["address"] == address_from_private_key(claimed_key)

    logout = runner.invoke(main, ["logout"], env=env)
    assert logout.exit_code == 0 and "Removed" in logout.output
    assert not credentials.exists()
    assert runner.invoke(main, ["whoami"], env=env).exit_code == 3, "no key any more"


def test_profiles_per_network_and_the_environment_wins(runner, config_home):
    testnet, production = generate_private_key(), generate_private_key()
    assert runner.invoke(main, ["login"], input=testnet + "\n").exit_code == 0
    assert runner.invoke(main, ["--env", "production", "login"], input=production + "\n").exit_code == 0
    assert runner.invoke(main, ["logout", "--env", "testnet"]).exit_code == 0
    document = json.loads((config_home / "tessera" / "credentials.json").read_text())
    assert document == {"profiles": {"production": {"api_key": production}}}
    again = runner.invoke(main, ["logout", "--env", "testnet", "--json"])
    assert json.loads(again.stdout) == {"env": "testnet", "removed": False}


def test_login_refuses_a_malformed_key(runner, config_home):
    result = runner.invoke(main, ["login"], input="0x1234\n")
    assert result.exit_code == 3
    assert not (config_home / "tessera").exists()


def test_help_lists_the_exit_codes_in_plain_text(runner):
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "Exit codes:\n    0  success\n    1  error" in result.output
    assert "3  authentication" in result.output and "tessera login" in result.output
    for command in (["agent", "create-card"], ["login"], ["whoami"], []):
        text = runner.invoke(main, [*command, "--help"]).output
        assert "``" not in text and "::" not in text, text


def test_tessera_admin_runs_tesseras_commands_beside_a_decoy_app_py(tmp_path: Path):
    decoy = tmp_path / "project"
    decoy.mkdir()
    (decoy / "app.py").write_text('raise SystemExit("the local app.py was imported")\n')
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["tessera-admin"] == "app.admin:main"
    # What pip writes for the console script: its directory, not the current one, leads sys.path.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "tessera-admin"
    script.write_text("import sys\nfrom app.admin import main\nsys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    shadowed = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "--help"], cwd=decoy, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "the local app.py was imported" in shadowed.stderr, "the hazard tessera-admin avoids"
    result = subprocess.run([sys.executable, str(script), "agents", "--help"], cwd=decoy, env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "grant-credits" in result.stdout
    assert "--app IMPORT" not in subprocess.run([sys.executable, str(script), "--help"], cwd=decoy, env=env,
                                         capture_output=True, text=True, timeout=60).stdout  # fmt: skip
