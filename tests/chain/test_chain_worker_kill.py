"""A worker killed in the middle of a chain write (a host-card job, a set-card job): after its
transaction was signed and sent, before the job's final state. A new worker finishes the job, and
the chain holds exactly one registration for it, read back from the node's logs, which the card and
Tessera's tables (the registry follower's index for set-card) name.

The session's worker is restarted with the evm backend on the test node (and restarted plain after);
the node mines only when told to, so the transaction waits in its pool while the worker is killed.
"""

from __future__ import annotations

import json
import signal
import time

import pytest
from sqlalchemy import select

from app.chain.models import AgentIdentity, ChainTransactionVersion
from app.chain.registry import RECORD_STEP
from app.chain.typed_data import ZERO_ADDRESS
from app.client.library import TesseraClient
from app.db import Mode, unit_of_work
from app.extensions import db
from tests.chain.conftest import CHAIN_ID, RELAYER, follow_index, indexed_record, sent_step
from tests.support.agents import claim_key_over_http, registration_card
from tests.support.config import change_settings
from tests.support.environment import fetch_job, republish_abandoned

pytestmark = pytest.mark.realworker


class ChainWorker:
    """The session's worker process, started with the evm backend's settings."""

    def __init__(self, control, settings: dict[str, str]) -> None:
        self.control, self.settings = control, settings

    def start(self) -> None:
        self.control.start(extra_env=self.settings)

    def kill(self) -> None:
        self.control.stop(signal.SIGKILL)


@pytest.fixture
def chain_worker(app, anvil, real_worker, evm_settings, monkeypatch):
    """The session's worker restarted with the evm backend (short waits), mining off; both undone after."""
    settings = {**evm_settings, "CHAIN_RPC_TIMEOUT": "1", "JOB_RETRY_BACKOFF_MAX": "0.2"}
    change_settings(monkeypatch, app, **settings)
    anvil.w3.provider.make_request("evm_setAutomine", [False])
    real_worker.stop()
    worker = ChainWorker(real_worker, settings)
    worker.start()
    try:
        yield worker
    finally:
        anvil.w3.provider.make_request("evm_setAutomine", [True])
        real_worker.stop()
        real_worker.start()


def _wait_for(what: str, predicate, timeout: float = 30.0, between=lambda: None):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"no {what} after {timeout}s"
        between()
        time.sleep(0.1)
    return value


def _identities(app, did: str) -> list[tuple[str, str]]:
    with app.app_context(), unit_of_work(Mode.READ):
        rows = db.session.scalars(select(AgentIdentity).where(AgentIdentity.did == did)).all()
        return [(row.agent_id, row.tx_hash) for row in rows]


def _versions(app, job_id: str) -> int:
    with app.app_context(), unit_of_work(Mode.READ):
        return len(
            db.session.scalars(select(ChainTransactionVersion).where(ChainTransactionVersion.job_id == job_id)).all()
        )


def test_worker_killed_after_sending_the_registration(app, anvil, identity, server, chain_worker):
    w3 = anvil.w3
    nonce = w3.eth.get_transaction_count(RELAYER)
    with TesseraClient(server.url, api_key=claim_key_over_http(server), poll_interval=0.05) as client:
        client.authenticate()
        job_id = client.host_card(registration_card("Killed"), wait=False)["id"]

        sent = _wait_for("transaction sent", lambda: (row := sent_step(app, job_id)) and row.tx_hash and row)
        _wait_for("transaction in the node's pool", lambda: w3.eth.get_transaction_count(RELAYER, "pending") > nonce)
        chain_worker.kill()

        assert fetch_job(app, job_id)["state"] == "running"
        assert w3.eth.get_transaction_count(RELAYER) == nonce  # sent, not mined
        assert _identities(app, client.did) == [] and identity.events.Registered().get_logs(from_block=0) == []

        chain_worker.start()
        republish_abandoned(app, job_id)
        finished = _wait_for(
            "final job",
            lambda: (job := fetch_job(app, job_id))["state"] != "running" and job,
            60,
            between=lambda: w3.provider.make_request("anvil_mine", ["0x1"]),  # blocks keep coming
        )

        assert finished["state"] == "succeeded", finished
        registered = identity.events.Registered().get_logs(from_block=0)
        assert len(registered) == 1  # the chain, read independently: one registration, one nonce used
        agent_id = registered[0]["args"]["agentId"]
        assert (
            registered[0]["transactionHash"].to_0x_hex() == sent.tx_hash == finished["result"]["transaction"]["txHash"]
        )
        assert w3.eth.get_transaction_count(RELAYER) == nonce + 1 and _versions(app, job_id) == 1
        card_url = finished["result"]["public_url"]
        assert identity.functions.tokenURI(agent_id).call() == card_url
        agent_registry = f"eip155:{CHAIN_ID}:{identity.address}"
        card = json.loads(client.get_agent_card(client.did))
        assert card["registrations"] == [{"agentId": agent_id, "agentRegistry": agent_registry}]
        assert _identities(app, client.did) == [(str(agent_id), sent.tx_hash)]


def test_worker_killed_after_sending_a_set_card(app, anvil, contracts, server, chain_worker):
    w3, registry, uri = anvil.w3, contracts.registry, "https://agent.example/killed/card.json"
    nonce = w3.eth.get_transaction_count(RELAYER)

    def events(name: str, did: str) -> list:
        return [log for log in getattr(registry.events, name)().get_logs(from_block=0) if log.args.did == did]

    with TesseraClient(server.url, api_key=claim_key_over_http(server), poll_interval=0.05) as client:
        client.authenticate()
        did = client.did
        job_id = client.set_card(uri, wait=False)["id"]  # signs a Register: the DID has no record on chain

        sent = _wait_for("record sent", lambda: (row := sent_step(app, job_id, RECORD_STEP)) and row.tx_hash and row)
        _wait_for("transaction in the node's pool", lambda: w3.eth.get_transaction_count(RELAYER, "pending") > nonce)
        chain_worker.kill()

        assert fetch_job(app, job_id)["state"] == "running"
        assert w3.eth.get_transaction_count(RELAYER) == nonce  # sent, not mined
        assert not registry.functions.isRegistered(did).call() and events("Registered", did) == []

        chain_worker.start()
        republish_abandoned(app, job_id)
        finished = _wait_for(
            "final job",
            lambda: (job := fetch_job(app, job_id))["state"] != "running" and job,
            60,
            between=lambda: w3.provider.make_request("anvil_mine", ["0x1"]),  # blocks keep coming
        )

    assert finished["state"] == "succeeded", finished
    (relayed,) = finished["result"]["transactions"]
    registered = events("Registered", did)  # the chain, read independently: one write, one nonce used
    assert [log.transactionHash.to_0x_hex() for log in registered] == [sent.tx_hash] == [relayed["txHash"]]
    assert events("CardSet", did) == []
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1 and _versions(app, job_id) == 1
    on_chain = tuple(registry.functions.getRecord(did).call())
    assert on_chain == (client.address, ZERO_ADDRESS, uri)
    follow_index(app, anvil)
    assert indexed_record(app, did) == on_chain
