"""`flask chain deploy` on a real node, and `GET /api/contracts/current` read from the chain with
`AGENT_REGISTRY_BACKEND=evm`."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from eth_account import Account
from sqlalchemy import text

from app.chain.abi import REGISTRY, load_artifact
from app.chain.registry import read_registry_version
from app.db import transaction
from app.extensions import db
from app.outbound import CalledInsideTransaction
from tests.chain.conftest import CHAIN_ID, RELAYER_KEY
from tests.support.config import change_settings
from tests.support.environment import REPO_ROOT

SETTINGS_LINE = re.compile(r"^CHAIN_TESTNET_(REGISTRY|IDENTITY_REGISTRY)_ADDRESS=(0x[0-9a-fA-F]{40})$", re.M)


def test_deploy_creates_both_contracts_and_prints_their_settings(app, anvil, monkeypatch):
    change_settings(
        monkeypatch,
        app,
        CHAIN_TESTNET_RPC_URL=anvil.url,
        CHAIN_TESTNET_CHAIN_ID=str(CHAIN_ID),
        CHAIN_RELAYER_KEY=RELAYER_KEY,
    )
    result = app.test_cli_runner().invoke(args=["chain", "deploy", "--env", "testnet"])
    assert result.exit_code == 0, result.output
    addresses = dict(SETTINGS_LINE.findall(result.output))
    assert set(addresses) == {"REGISTRY", "IDENTITY_REGISTRY"}
    registry = anvil.w3.eth.contract(address=addresses["REGISTRY"], abi=load_artifact(REGISTRY).abi)
    assert registry.functions.version().call() == "1.7.0"
    assert anvil.w3.eth.get_code(addresses["IDENTITY_REGISTRY"]) != b""
    assert RELAYER_KEY.removeprefix("0x") not in result.output


def _readme_chain_lines() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    block = text.split("## Your agents on a chain (optional)", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def _docs_chain_lines() -> list[str]:
    text = (REPO_ROOT / "docs" / "chain.md").read_text()
    return text.split("Deploy both contracts once", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0].splitlines()


def test_the_readme_and_the_chain_page_deploy_alike_and_restart_the_same_processes():
    readme, page = _readme_chain_lines(), _docs_chain_lines()
    assert readme[1:] == page[1:], "the same key line and the same command"
    names = [{part.split("=", 1)[0] for part in lines[0].removeprefix("export ").split()} for lines in (readme, page)]
    assert names[0] == names[1] == {"CHAIN_TESTNET_RPC_URL", "CHAIN_TESTNET_CHAIN_ID", "AGENT_CHAIN_ID"}
    for document in ("README.md", "docs/chain.md"):
        text = " ".join((REPO_ROOT / document).read_text().split())
        assert "environment of the web, worker and beat processes" in text, document
        assert "flask --app app chain deploy" not in text, document


def test_the_readme_chain_lines_deploy_with_tessera_admin(app, anvil, tmp_path):
    """The README's lines as written, with this node's URL and chain id and the relayer's key put in,
    on a fresh instance whose database was never migrated (deploying needs no table)."""
    exports, key_line, command = _readme_chain_lines()
    assert command == "tessera-admin chain deploy --env testnet"
    assert key_line.startswith("export CHAIN_RELAYER_KEY=0x...")
    settings = dict(part.split("=", 1) for part in exports.removeprefix("export ").split())
    assert set(settings) == {"CHAIN_TESTNET_RPC_URL", "CHAIN_TESTNET_CHAIN_ID", "AGENT_CHAIN_ID"}
    settings.update(CHAIN_TESTNET_RPC_URL=anvil.url, CHAIN_TESTNET_CHAIN_ID=str(CHAIN_ID), AGENT_CHAIN_ID=str(CHAIN_ID))
    # What pip writes for the console script (tests/agents/test_cli_profiles.py runs the same).
    script = tmp_path / "tessera-admin"
    script.write_text("import sys\nfrom app.admin import main\nsys.exit(main())\n")
    fresh = {"TESSERA_INSTANCE_DIR": str(tmp_path / "instance"), "DATABASE_URL": "", "REDIS_URL": "",
             "CELERY_BROKER_URL": ""}  # fmt: skip
    env = {**os.environ, **settings, **fresh, "CHAIN_RELAYER_KEY": RELAYER_KEY, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(script), *command.split()[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    addresses = dict(SETTINGS_LINE.findall(result.stdout))
    assert set(addresses) == {"REGISTRY", "IDENTITY_REGISTRY"}
    registry = anvil.w3.eth.contract(address=addresses["REGISTRY"], abi=load_artifact(REGISTRY).abi)
    assert registry.functions.version().call() == "1.7.0"


def test_deploy_refuses_a_node_of_another_chain_and_sends_nothing(app, anvil, monkeypatch):
    relayer = Account.from_key(RELAYER_KEY).address
    sent_before = anvil.w3.eth.get_transaction_count(relayer)
    change_settings(
        monkeypatch, app, CHAIN_TESTNET_RPC_URL=anvil.url, CHAIN_TESTNET_CHAIN_ID="1", CHAIN_RELAYER_KEY=RELAYER_KEY
    )
    result = app.test_cli_runner().invoke(args=["chain", "deploy", "--env", "testnet"])
    assert result.exit_code == 1 and f"is chain {CHAIN_ID}, not 1" in result.output
    assert anvil.w3.eth.get_transaction_count(relayer) == sent_before


def test_deploy_needs_a_relayer_key(app, anvil, monkeypatch):
    change_settings(monkeypatch, app, CHAIN_TESTNET_RPC_URL=anvil.url, CHAIN_TESTNET_CHAIN_ID=str(CHAIN_ID))
    monkeypatch.delenv("CHAIN_RELAYER_KEY", raising=False)
    result = app.test_cli_runner().invoke(args=["chain", "deploy", "--env", "testnet"])
    assert result.exit_code == 1 and "Set CHAIN_RELAYER_KEY" in result.output


def _evm(monkeypatch, app, anvil, contracts, **extra) -> None:
    settings = {
        "AGENT_REGISTRY_BACKEND": "evm",
        "AGENT_NETWORK": "testnet",
        "CHAIN_TESTNET_RPC_URL": anvil.url,
        "CHAIN_TESTNET_CHAIN_ID": str(CHAIN_ID),
        "CHAIN_TESTNET_REGISTRY_ADDRESS": contracts.registry.address,
        "CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS": contracts.identity.address,
    }
    change_settings(monkeypatch, app, **{**settings, **extra})


def test_the_current_contract_version_is_read_from_the_chain(app, client, anvil, contracts, monkeypatch):
    # The setting says otherwise: only the chain can have answered 1.7.0.
    _evm(monkeypatch, app, anvil, contracts, AGENT_REGISTRY_VERSION="0.0.1")
    response = client.get("/api/contracts/current?name=agent-registry")
    assert response.status_code == 200, response.get_json()
    assert response.get_json() == {"data": {"name": "agent-registry", "version": "1.7.0"}}


def test_the_database_backend_still_answers_its_setting(app, client, monkeypatch):
    change_settings(monkeypatch, app, AGENT_REGISTRY_VERSION="1.8.0")
    assert client.get("/api/contracts/current?name=agent-registry").get_json()["data"]["version"] == "1.8.0"


def test_an_unanswering_or_unconfigured_chain_is_a_503_problem(app, client, anvil, contracts, monkeypatch):
    _evm(monkeypatch, app, anvil, contracts, CHAIN_TESTNET_RPC_URL="http://127.0.0.1:9")
    response = client.get("/api/contracts/current?name=agent-registry")
    assert response.status_code == 503 and response.mimetype == "application/problem+json"
    assert response.get_json()["code"] == "chain_unavailable"
    _evm(monkeypatch, app, anvil, contracts, CHAIN_TESTNET_REGISTRY_ADDRESS="")
    response = client.get("/api/contracts/current?name=agent-registry")
    assert response.status_code == 503 and response.get_json()["code"] == "chain_not_configured"
    assert "CHAIN_TESTNET_REGISTRY_ADDRESS" in response.get_json()["detail"]


def test_no_chain_call_runs_inside_a_database_transaction(app, anvil, contracts, monkeypatch):
    _evm(monkeypatch, app, anvil, contracts)
    with app.app_context():
        assert read_registry_version("testnet") == "1.7.0"
        with pytest.raises(CalledInsideTransaction), transaction():
            db.session.execute(text("SELECT 1"))
            read_registry_version("testnet")
