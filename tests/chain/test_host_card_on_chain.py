"""host-card with `AGENT_REGISTRY_BACKEND=evm` on a real node: the job registers the agent's ERC-8004
identity (tokenURI = the hosted card's URL) with one transaction, however often it runs, stores the
card with `{agentId, agentRegistry}` once the transaction has its confirmations, and fails, releasing
the credit hold, when the chain refuses the call.

The request goes over HTTP to a live server; the job is held in the outbox (no worker takes it) and
run in process with the worker's own `run_job`, so each run is one step the test can look between.
"""

from __future__ import annotations

import json
import socket

import pytest

from app.agents.credits import held_credits
from app.chain import relay
from app.chain.errors import NotYetConfirmed, NotYetMined
from app.chain.identity import IDENTITY_STEP
from app.client.library import TesseraClient
from app.db import Mode, unit_of_work
from app.jobs.runner import TransientError
from tests.chain.conftest import CHAIN_ID, CONFIRMATIONS, RELAYER, run_host_card, sent_step
from tests.support.agents import account_id, claim_key_over_http, registration_card
from tests.support.config import change_settings


def _held(app, did: str) -> int:
    with app.app_context(), unit_of_work(Mode.READ):
        return held_credits(account_id(did))


def test_host_card_registers_the_agent_on_chain_with_one_transaction(app, anvil, identity, evm):
    w3 = anvil.w3
    balance = evm.credits()["balance"]
    job = evm.host_card(registration_card("On chain"), wait=False)
    nonce_before = w3.eth.get_transaction_count(RELAYER)

    with pytest.raises(NotYetConfirmed):  # sent and mined, not yet confirmed: the job's retry asks again
        run_host_card(app, job["id"])
    sent = sent_step(app, job["id"])
    assert sent.nonce == nonce_before and sent.tx_hash is not None
    assert evm.get_job(job["id"])["state"] == "running"
    assert w3.eth.get_transaction_count(RELAYER) == nonce_before + 1

    with pytest.raises(NotYetConfirmed):  # run again: the same signed transaction, nothing new sent
        run_host_card(app, job["id"])
    assert sent_step(app, job["id"]).tx_hash == sent.tx_hash
    assert w3.eth.get_transaction_count(RELAYER) == nonce_before + 1

    w3.provider.make_request("anvil_mine", [hex(CONFIRMATIONS)])
    run_host_card(app, job["id"])
    run_host_card(app, job["id"])  # a redelivery of a finished job does nothing
    assert w3.eth.get_transaction_count(RELAYER) == nonce_before + 1

    finished = evm.get_job(job["id"])
    assert finished["state"] == "succeeded", finished
    receipt = finished["result"]["transaction"]
    agent_registry = f"eip155:{CHAIN_ID}:{identity.address}"
    assert receipt["txHash"] == sent.tx_hash and receipt["nonce"] == nonce_before and receipt["status"] == 1
    assert receipt["agentRegistry"] == agent_registry
    assert w3.eth.get_transaction_receipt(sent.tx_hash)["blockNumber"] == receipt["blockNumber"]

    agent_id = int(receipt["agentId"])
    card_url = finished["result"]["public_url"]
    assert card_url.endswith(f"/api/agent-card/{evm.did}")
    assert identity.functions.tokenURI(agent_id).call() == card_url
    assert identity.functions.ownerOf(agent_id).call() == RELAYER
    public = json.loads(evm.get_agent_card(evm.did))
    assert public["registrations"] == [{"agentId": agent_id, "agentRegistry": agent_registry}]
    assert public["name"] == "On chain"
    assert evm.get_card()["card"] == public
    assert evm.credits()["balance"] == balance - finished["result"]["charged"]


def test_hosting_again_keeps_the_agent_id_and_sends_nothing(app, anvil, identity, evm):
    w3 = anvil.w3
    first = evm.host_card(registration_card("First"), wait=False)
    with pytest.raises(NotYetConfirmed):
        run_host_card(app, first["id"])
    w3.provider.make_request("anvil_mine", [hex(CONFIRMATIONS)])
    run_host_card(app, first["id"])
    agent_id = evm.get_job(first["id"])["result"]["transaction"]["agentId"]
    nonce = w3.eth.get_transaction_count(RELAYER)

    second = evm.host_card(registration_card("Second"), wait=False)
    run_host_card(app, second["id"])
    assert evm.get_job(second["id"])["state"] == "succeeded"
    assert sent_step(app, second["id"]) is None and w3.eth.get_transaction_count(RELAYER) == nonce
    public = json.loads(evm.get_agent_card(evm.did))
    assert public["name"] == "Second"
    agent_registry = f"eip155:{CHAIN_ID}:{identity.address}"
    assert public["registrations"] == [{"agentId": int(agent_id), "agentRegistry": agent_registry}]


def test_a_call_the_contract_refuses_fails_the_job_and_releases_the_hold(app, anvil, contracts, evm, monkeypatch):
    # The TesseraRegistry has no register(string) and no fallback: every such call reverts.
    change_settings(monkeypatch, app, CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS=contracts.registry.address)
    w3 = anvil.w3
    balance = evm.credits()["balance"]
    job = evm.host_card(registration_card("Refused"), wait=False)
    assert _held(app, evm.did) > 0
    nonce = w3.eth.get_transaction_count(RELAYER)

    run_host_card(app, job["id"])

    failed = evm.get_job(job["id"])
    assert failed["state"] == "failed" and failed["error"]["code"] == "chain_transaction_reverted", failed
    assert sent_step(app, job["id"]) is None and w3.eth.get_transaction_count(RELAYER) == nonce
    assert _held(app, evm.did) == 0
    assert evm.credits()["balance"] == balance
    with pytest.raises(Exception, match="404|not found|No card"):
        evm.get_card()


def test_a_transaction_mined_as_reverted_fails_the_job_and_releases_the_hold(app, anvil, contracts, identity, evm):
    w3 = anvil.w3
    balance = evm.credits()["balance"]
    job = evm.host_card(registration_card("Reverted"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    w3.provider.make_request("evm_setAutomine", [False])
    try:
        with pytest.raises(NotYetMined):  # sent, not mined within the deadline
            run_host_card(app, job["id"])
        # Before it is mined the contract changes under it: the mined transaction reverts (status 0).
        runtime = w3.eth.get_code(identity.address)
        refusing = w3.eth.get_code(contracts.registry.address).to_0x_hex()
        w3.provider.make_request("anvil_setCode", [identity.address, refusing])
        w3.provider.make_request("anvil_mine", [hex(1 + CONFIRMATIONS)])
    finally:
        w3.provider.make_request("evm_setAutomine", [True])
    sent = sent_step(app, job["id"])
    assert w3.eth.get_transaction_receipt(sent.tx_hash)["status"] == 0
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1

    run_host_card(app, job["id"])

    failed = evm.get_job(job["id"])
    assert failed["state"] == "failed" and failed["error"]["code"] == "chain_transaction_reverted", failed
    assert sent.tx_hash in failed["error"]["detail"]
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1  # the failing run sent nothing more
    assert _held(app, evm.did) == 0
    assert evm.credits()["balance"] == balance
    w3.provider.make_request("anvil_setCode", [identity.address, runtime.to_0x_hex()])


def test_a_run_killed_after_taking_its_nonce_is_resumed_with_that_nonce(app, anvil, server, evm):
    w3 = anvil.w3
    job = evm.host_card(registration_card("Resumed"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    with app.app_context():  # what the killed run did before it died: its nonce taken, nothing signed
        assert relay._take_nonce(job["id"], IDENTITY_STEP, f"{CHAIN_ID}:{RELAYER}", nonce) == nonce
    with TesseraClient(server.url, api_key=claim_key_over_http(server), poll_interval=0.05) as other:
        other.authenticate()
        later = other.host_card(registration_card("Next in line"), wait=False)
        with pytest.raises(NotYetMined):
            run_host_card(app, later["id"])
        assert sent_step(app, later["id"]).nonce == nonce + 1  # the relayer's row gave the next one

        with pytest.raises(NotYetConfirmed):
            run_host_card(app, job["id"])
        assert sent_step(app, job["id"]).nonce == nonce
        w3.provider.make_request("anvil_mine", [hex(CONFIRMATIONS)])
        run_host_card(app, job["id"])
        run_host_card(app, later["id"])
        assert evm.get_job(job["id"])["state"] == other.get_job(later["id"])["state"] == "succeeded"
        assert w3.eth.get_transaction_count(RELAYER) == nonce + 2


def test_a_node_that_does_not_answer_leaves_the_job_to_its_retry(app, evm, monkeypatch):
    change_settings(monkeypatch, app, CHAIN_TESTNET_RPC_URL=f"http://127.0.0.1:{_closed_port()}")
    job = evm.host_card(registration_card("Unanswered"), wait=False)

    with pytest.raises(TransientError):
        run_host_card(app, job["id"])

    assert evm.get_job(job["id"])["state"] == "running"
    assert sent_step(app, job["id"]) is None


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
