"""The committed ABI and bytecode are what the pinned solc-js compiles from the committed sources."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from app.chain.abi import ARTIFACTS, IDENTITY_REGISTRY, REGISTRY
from tests.chain.conftest import CHAIN_DIR, installed_packages


@pytest.mark.embedded  # node and solc-js alone, the same in both runs
def test_rebuilding_the_contracts_gives_the_committed_artifacts(tmp_path):
    assert (installed_packages() / "solc").is_dir()
    result = subprocess.run(
        ["node", "build.mjs", "--check"], cwd=CHAIN_DIR, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.embedded  # node and solc-js alone, the same in both runs
def test_the_check_sees_a_changed_artifact(tmp_path):
    modules = installed_packages()
    copy = tmp_path / "chain"
    shutil.copytree(CHAIN_DIR, copy, symlinks=True, ignore=shutil.ignore_patterns("node_modules"))
    (copy / "node_modules").symlink_to(modules)
    artifact = copy / "artifacts" / f"{REGISTRY}.json"
    data = json.loads(artifact.read_text())
    data["bytecode"] = data["bytecode"][:-2] + ("00" if not data["bytecode"].endswith("00") else "01")
    artifact.write_text(json.dumps(data, indent=2) + "\n")
    result = subprocess.run(["node", "build.mjs", "--check"], cwd=copy, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and f"{REGISTRY}.json" in result.stderr


def test_both_artifacts_are_committed_with_abi_and_bytecode():
    for name in (REGISTRY, IDENTITY_REGISTRY):
        data = json.loads((ARTIFACTS / f"{name}.json").read_text())
        assert (
            data["contractName"] == name
            and data["abi"]
            and data["bytecode"].startswith("0x")
            and len(data["bytecode"]) > 1000
        )
        assert data["compiler"].startswith("solc-js 0.8.")
