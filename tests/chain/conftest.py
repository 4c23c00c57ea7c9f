"""A real chain for the tests: anvil from the pinned `@foundry-rs/anvil` npm package on a free port,
with TesseraRegistry and the ERC-8004 IdentityRegistry deployed from the committed artifacts; the
application over real HTTP with the evm backend on it (`evm`), jobs run in the test step by step.

`installed_packages()` runs `npm ci` in app/chain on first use (package-lock.json pins solc,
OpenZeppelin and anvil); without node and npm these tests are skipped.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from eth_account import Account
from sqlalchemy import select
from web3 import Web3
from werkzeug.serving import make_server

from app.agents.tasks import (
    approve_consent,
    card_unpublish,
    deregister,
    follow_registry,
    host_card,
    revoke_owner,
    set_card,
)
from app.chain.abi import IDENTITY_REGISTRY, REGISTRY, load_artifact
from app.chain.deploy import deploy_contract, deploy_contracts
from app.chain.identity import IDENTITY_STEP
from app.chain.index import get_indexed_record, next_block
from app.chain.models import ChainTransaction
from app.chain.settings import ChainSettings
from app.chain.typed_data import ZERO_ADDRESS
from app.client.library import TesseraClient
from app.db import Mode, unit_of_work
from app.extensions import db
from app.jobs import service as jobs
from app.jobs.models import QUEUED, Job
from app.jobs.service import run_job
from app.settings import current
from tests.support.agents import LiveServer, claim_key_over_http
from tests.support.config import change_settings
from tests.support.environment import REPO_ROOT, TMP_DIR

CHAIN_DIR = REPO_ROOT / "app" / "chain"
CHAIN_ID = 31337
# anvil's first development account (its well-known test mnemonic): the relayer of the tests.
RELAYER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
RELAYER = Account.from_key(RELAYER_KEY).address
CONFIRMATIONS = 2


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


@pytest.fixture(scope="session")
def server(app) -> Iterator[LiveServer]:
    """The application over real HTTP on a loopback port, in a thread (jobs run where each test says)."""
    http = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, name="chain-live-server", daemon=True)
    thread.start()
    yield LiveServer(f"http://127.0.0.1:{http.server_port}")
    http.shutdown()
    thread.join(timeout=10)


@pytest.fixture
def identity(anvil):
    """An IdentityRegistry of this test's own (a test may change its code on the node)."""
    address = deploy_contract(anvil.w3, Account.from_key(RELAYER_KEY).key, IDENTITY_REGISTRY)
    return anvil.w3.eth.contract(address=address, abi=load_artifact(IDENTITY_REGISTRY).abi)


@pytest.fixture
def evm_settings(anvil, contracts, identity, server) -> dict[str, str]:
    """The settings of the evm backend on the test node, the identity registry this test's own."""
    return {
        "AGENT_REGISTRY_BACKEND": "evm",
        "AGENT_NETWORK": "testnet",
        "AGENT_NETWORK_URL": server.url,
        "AGENT_CLAIM_RATE_LIMIT": "10000 per hour",
        "AGENT_CHALLENGE_RATE_LIMIT": "10000 per minute",
        "CHAIN_TESTNET_RPC_URL": anvil.url,
        "CHAIN_TESTNET_CHAIN_ID": str(CHAIN_ID),
        "CHAIN_TESTNET_REGISTRY_ADDRESS": contracts.registry.address,
        "CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS": identity.address,
        "CHAIN_RELAYER_KEY": RELAYER_KEY,
        "CHAIN_CONFIRMATIONS": str(CONFIRMATIONS),
        "CHAIN_RPC_TIMEOUT": "2",
    }


@pytest.fixture
def evm(app, evm_settings, server, monkeypatch):
    """The evm backend on the test node, jobs held in the outbox; a signed-in agent's client."""
    change_settings(monkeypatch, app, **evm_settings)
    monkeypatch.setattr(jobs, "_broker_down_until", time.monotonic() + 3600)
    with TesseraClient(server.url, api_key=claim_key_over_http(server), poll_interval=0.05) as client:
        client.authenticate()
        yield client


def run_host_card(app, job_id: str) -> None:
    """One run of a host-card job in this process, as the worker's task runs it."""
    with app.app_context():
        run_job(job_id, host_card.handler)


def sent_step(app, job_id: str, step: str = IDENTITY_STEP) -> ChainTransaction | None:
    """A job's transaction of `step` (the host-card's identity by default) as stored, detached."""
    with app.app_context(), unit_of_work(Mode.READ):
        row = db.session.get(ChainTransaction, (job_id, step))
        if row is not None:
            db.session.expunge(row)
        return row


def follow_index(app, anvil: Node) -> None:
    """Run the registry follower (`agents.follow_registry`) in this process until it has read every
    block with `CHAIN_CONFIRMATIONS` on top."""
    with app.app_context():
        while True:
            follow_registry.apply(throw=True)  # a failure raises here; no .get() (a worker in this process forbids it)
            with unit_of_work(Mode.READ):
                caught_up = next_block("testnet") > anvil.w3.eth.block_number - current(ChainSettings).confirmations
            if caught_up:
                return


def indexed_record(app, did: str) -> tuple[str, str, str] | None:
    """Tessera's index of the DID's record (`chain_registry_records`) as getRecord answers it:
    (agent, owner, cardURI); None when the index has no record."""
    with app.app_context(), unit_of_work(Mode.READ):
        row = get_indexed_record("testnet", did)
        return None if row is None else (row.agent_address, row.owner_address or ZERO_ADDRESS, row.card_uri)


@contextmanager
def worker_started_with(real_worker, settings: dict[str, str] | None) -> Iterator[None]:
    """The session's worker (PostgreSQL + Redis runs) restarted with `settings` in its environment,
    and restarted plain after; nothing changes when `settings` is None (SQLite: jobs run in process)."""
    if settings is None:
        yield
        return
    real_worker.stop()
    real_worker.start(extra_env=settings)
    try:
        yield
    finally:
        real_worker.stop()
        real_worker.start()


@contextmanager
def jobs_run_in_process(app, *dids: str) -> Iterator[None]:
    """Run the queued registry jobs of `dids` in a thread of this process, as a worker would, while the
    block runs (the outbox holds them: no worker takes them)."""
    handlers = {
        task.name: task.handler for task in (set_card, card_unpublish, deregister, approve_consent, revoke_owner)
    }
    stop = threading.Event()

    def work() -> None:
        while not stop.wait(0.05):
            with app.app_context():
                with unit_of_work(Mode.READ):
                    queued = db.session.execute(
                        select(Job.id, Job.kind).where(Job.agent_did.in_(dids), Job.state == QUEUED)
                    ).all()
                for job_id, kind in queued:
                    run_job(job_id, handlers[kind])

    thread = threading.Thread(target=work, name="chain-jobs", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
