"""A real chain for the tests: anvil from the pinned `@foundry-rs/anvil` npm package on a free port,
with TesseraRegistry and the ERC-8004 IdentityRegistry deployed from the committed artifacts.

`installed_packages()` runs `npm ci` in app/chain on first use (package-lock.json pins solc,
OpenZeppelin and anvil); without node and npm these tests are skipped.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from eth_account import Account
from web3 import Web3

from app.chain.abi import IDENTITY_REGISTRY, REGISTRY, load_artifact
from app.chain.deploy import deploy_contracts
from tests.support.environment import REPO_ROOT, TMP_DIR

CHAIN_DIR = REPO_ROOT / "app" / "chain"
CHAIN_ID = 31337
# anvil's first development account (its well-known test mnemonic): the relayer of the tests.
RELAYER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


def installed_packages() -> Path:
    """app/chain's node_modules, installed by `npm ci` from its lock file the first time."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the chain tests (solc-js and anvil come from npm)")
    modules = CHAIN_DIR / "node_modules"
    if not (modules / ".package-lock.json").exists():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=CHAIN_DIR, check=True, timeout=600, capture_output=True
        )
    return modules


def anvil_binary() -> Path:
    """The anvil executable the `@foundry-rs/anvil` npm package ships."""
    found = sorted((installed_packages() / "@foundry-rs").glob("anvil-*/bin/anvil"))
    assert found, "the @foundry-rs/anvil package holds no anvil binary"
    return found[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Node:
    """A running anvil: its URL, a plain web3 client of it (the independent reader) and its process."""

    url: str
    w3: Web3
    process: subprocess.Popen


@pytest.fixture(scope="session")
def anvil() -> Iterator[Node]:
    port = _free_port()
    with open(TMP_DIR / f"anvil-{port}.log", "wb") as log:
        process = subprocess.Popen(
            [str(anvil_binary()), "--host", "127.0.0.1", "--port", str(port), "--chain-id", str(CHAIN_ID)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        w3 = Web3(Web3.HTTPProvider(url))
        deadline = time.monotonic() + 30
        while not w3.is_connected():
            assert process.poll() is None, f"anvil exited with {process.returncode}"
            assert time.monotonic() < deadline, "anvil did not answer within 30 s"
            time.sleep(0.1)
        try:
            yield Node(url, w3, process)
        finally:
            process.terminate()
            process.wait(timeout=10)


@dataclass(frozen=True)
class Contracts:
    registry: object
    identity: object


@pytest.fixture(scope="session")
def contracts(anvil: Node) -> Contracts:
    deployment = deploy_contracts(anvil.w3, Account.from_key(RELAYER_KEY).key)
    return Contracts(
        anvil.w3.eth.contract(address=deployment.registry_address, abi=load_artifact(REGISTRY).abi),
        anvil.w3.eth.contract(address=deployment.identity_registry_address, abi=load_artifact(IDENTITY_REGISTRY).abi),
    )
