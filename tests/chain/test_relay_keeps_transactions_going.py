"""A job's transaction kept going until it is mined on the canonical chain, on a real node: a stuck
one replaced with the same nonce and higher fees, one a reorganisation dropped sent again as
stored, and beat's `chain.follow_transactions` doing both for running jobs and recording what the
chain has of them. Whatever happens, the relayer's nonce is used once and the job ends with the one
transaction mined.

Jobs are held in the outbox and run in process step by step (`run_host_card`); the node's mining is
switched off where a test needs a transaction to wait, and switched back on when it ends.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
import requests
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from hexbytes import HexBytes
from sqlalchemy import select, update
from web3.exceptions import TransactionNotFound

from app.agents.credits import held_credits
from app.chain import relay as relay_module
from app.chain.errors import NotYetConfirmed, NotYetMined, TransactionReverted
from app.chain.identity import IDENTITY_STEP
from app.chain.models import ChainTransaction, ChainTransactionVersion
from app.chain.relay import confirmed_receipt
from app.chain.tasks import beat_schedule, follow_transactions
from app.db import Mode, transaction, unit_of_work
from app.extensions import db
from tests.chain.conftest import CHAIN_ID, CONFIRMATIONS, RELAYER, RELAYER_KEY, run_host_card, sent_step
from tests.support.agents import account_id, registration_card
from tests.support.config import change_settings
from tests.support.servers import serve_on_loopback


@pytest.fixture
def relay(app, anvil, evm, monkeypatch):
    """The evm client, with a one-second wait for receipts; the node mines only when told to."""
    change_settings(monkeypatch, app, CHAIN_RPC_TIMEOUT="1")
    anvil.w3.provider.make_request("evm_setAutomine", [False])
    try:
        yield evm
    finally:
        anvil.w3.provider.make_request("evm_setAutomine", [True])


@pytest.fixture
def base_fee_restored(anvil) -> Iterator[None]:
    yield
    anvil.w3.provider.make_request("anvil_setNextBlockBaseFeePerGas", [hex(10**9)])
    anvil.w3.provider.make_request("anvil_mine", ["0x1"])


def _mine(anvil, blocks: int) -> None:
    anvil.w3.provider.make_request("anvil_mine", [hex(blocks)])


def _versions(app, job_id: str) -> list[str]:
    with app.app_context(), unit_of_work(Mode.READ):
        return list(
            db.session.scalars(
                select(ChainTransactionVersion.tx_hash)
                .where(ChainTransactionVersion.job_id == job_id, ChainTransactionVersion.step == IDENTITY_STEP)
                .order_by(ChainTransactionVersion.created_at)
            )
        )


def _signed(raw: str) -> dict:
    return TypedTransaction.from_bytes(HexBytes(raw)).as_dict()


def _sent_long_ago(app, job_id: str) -> None:
    """As if the step's latest version had waited `CHAIN_STUCK_SECONDS` (60) unmined."""
    with app.app_context(), transaction():
        row = db.session.get(ChainTransaction, (job_id, IDENTITY_STEP))
        db.session.execute(
            update(ChainTransaction)
            .where(ChainTransaction.job_id == job_id)
            .values(sent_at=row.sent_at - timedelta(seconds=61))
        )


def _registered(identity, uri: str) -> list:
    """The `Registered` events of `identity` naming `uri`, read from the node's logs."""
    events = identity.events.Registered().get_logs(from_block=0)
    return [event for event in events if identity.functions.tokenURI(event["args"]["agentId"]).call() == uri]


def _finish(app, anvil, job_id: str) -> None:
    _mine(anvil, 1 + CONFIRMATIONS)
    run_host_card(app, job_id)


def test_a_stuck_transaction_is_replaced_with_higher_fees_and_one_is_mined(app, anvil, identity, relay):
    w3 = anvil.w3
    job = relay.host_card(registration_card("Stuck"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])
    first = sent_step(app, job["id"])
    with pytest.raises(NotYetMined):  # not stuck yet: the same bytes again
        run_host_card(app, job["id"])
    assert _versions(app, job["id"]) == [first.tx_hash]

    _sent_long_ago(app, job["id"])
    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])

    second = sent_step(app, job["id"])
    assert _versions(app, job["id"]) == [first.tx_hash, second.tx_hash]
    old, new = _signed(first.raw_transaction), _signed(second.raw_transaction)
    assert new["nonce"] == old["nonce"] == nonce and new["data"] == old["data"]
    for fee in ("maxFeePerGas", "maxPriorityFeePerGas"):
        assert new[fee] * 8 >= old[fee] * 9  # at least 12.5 % more: the node took it as a replacement
    assert w3.eth.get_transaction(second.tx_hash)["nonce"] == nonce

    _finish(app, anvil, job["id"])
    with pytest.raises(TransactionNotFound):
        w3.eth.get_transaction_receipt(first.tx_hash)
    assert w3.eth.get_transaction_receipt(second.tx_hash)["status"] == 1
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1
    with app.app_context():
        assert confirmed_receipt(w3, first.tx_hash).tx_hash == second.tx_hash  # any version finds the mined one
    finished = relay.get_job(job["id"])
    assert finished["state"] == "succeeded", finished
    assert finished["result"]["transaction"]["txHash"] == second.tx_hash
    assert len(_registered(identity, finished["result"]["public_url"])) == 1


def test_no_replacement_is_sent_above_the_fee_ceiling(app, anvil, identity, relay, monkeypatch):
    job = relay.host_card(registration_card("Ceiling"), wait=False)
    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])
    first = sent_step(app, job["id"])
    ceiling = _signed(first.raw_transaction)["maxFeePerGas"]  # a raise of 12.5 % would pass it
    change_settings(monkeypatch, app, CHAIN_MAX_FEE_PER_GAS=str(ceiling))
    _sent_long_ago(app, job["id"])

    with pytest.raises(NotYetMined, match="CHAIN_MAX_FEE_PER_GAS"):
        run_host_card(app, job["id"])
    with app.app_context():
        follow_transactions.apply(throw=True)  # beat does not replace it either

    assert _versions(app, job["id"]) == [first.tx_hash]  # the version sent waits
    _finish(app, anvil, job["id"])
    assert relay.get_job(job["id"])["state"] == "succeeded"
    assert anvil.w3.eth.get_transaction_receipt(first.tx_hash)["status"] == 1


def test_a_nonce_taken_for_a_call_the_contract_then_refuses_is_filled(app, anvil, contracts, evm):
    """A run took the step's nonce and stopped before signing; on the next run the contract refuses
    the call: the nonce is spent on a transfer of nothing, and the relayer's next transaction mines."""
    w3 = anvil.w3
    job_id, account = str(uuid.uuid4()), f"{CHAIN_ID}:{RELAYER}"
    nonce = w3.eth.get_transaction_count(RELAYER, "pending")
    refused = {
        "to": contracts.registry.address,
        "data": contracts.registry.encode_abi("setCard", args=["did:tessera:unknown", "https://x", 2**40, b"\0" * 65]),
    }
    with app.app_context():
        assert relay_module._take_nonce(job_id, "record", account, nonce) == nonce
        with pytest.raises(TransactionReverted):
            relay_module.send_once(w3, bytes.fromhex(RELAYER_KEY[2:]), job_id, refused, step="record")

    filler = w3.eth.get_transaction(_step(app, job_id).tx_hash)
    assert (filler["nonce"], filler["to"], filler["value"], filler["input"]) == (nonce, RELAYER, 0, b"")
    assert w3.eth.get_transaction_receipt(filler["hash"])["status"] == 1
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1  # nothing waits behind an unused nonce


def _step(app, job_id: str) -> ChainTransaction:
    with app.app_context(), unit_of_work(Mode.READ):
        row = db.session.get(ChainTransaction, (job_id, "record"))
        db.session.expunge(row)
        return row


def test_a_transaction_the_node_refuses_for_its_fees_is_replaced(app, anvil, identity, relay, base_fee_restored):
    w3 = anvil.w3
    job = relay.host_card(registration_card("Underpriced"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])
    first = sent_step(app, job["id"])
    # The base fee jumps above what the transaction offers: the node drops it and refuses it again.
    w3.provider.make_request(
        "anvil_setNextBlockBaseFeePerGas", [hex(10 * _signed(first.raw_transaction)["maxFeePerGas"])]
    )
    _mine(anvil, 1)
    assert w3.eth.get_transaction_count(RELAYER, "pending") == nonce

    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])

    second = sent_step(app, job["id"])
    assert second.tx_hash != first.tx_hash
    assert _signed(second.raw_transaction)["maxFeePerGas"] > w3.eth.get_block("latest")["baseFeePerGas"]
    _finish(app, anvil, job["id"])
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1
    finished = relay.get_job(job["id"])
    assert finished["state"] == "succeeded" and finished["result"]["transaction"]["txHash"] == second.tx_hash
    assert len(_registered(identity, finished["result"]["public_url"])) == 1


def test_a_nonce_another_transaction_spent_fails_the_job_once_settled_and_releases_the_hold(app, anvil, relay):
    w3 = anvil.w3
    balance = relay.credits()["balance"]
    job = relay.host_card(registration_card("Nonce taken"), wait=False)
    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])
    first = sent_step(app, job["id"])
    # Someone with the relayer's key sends another transaction with that nonce, at a higher fee.
    old = _signed(first.raw_transaction)
    outside = {
        "type": 2, "chainId": old["chainId"], "nonce": old["nonce"], "to": RELAYER, "value": 0, "gas": 21000,
        "maxFeePerGas": 2 * old["maxFeePerGas"], "maxPriorityFeePerGas": 2 * old["maxPriorityFeePerGas"],
    }  # fmt: skip
    w3.eth.send_raw_transaction(Account.sign_transaction(outside, RELAYER_KEY).raw_transaction)
    _mine(anvil, 1)
    _sent_long_ago(app, job["id"])

    with pytest.raises(NotYetMined):  # the other transaction lacks its confirmations: no replacement, a wait
        run_host_card(app, job["id"])
    assert _versions(app, job["id"]) == [first.tx_hash]
    assert relay.get_job(job["id"])["state"] == "running"

    _mine(anvil, CONFIRMATIONS)
    _follow(app)  # beat leaves it to the job, saying why in its log
    run_host_card(app, job["id"])

    failed = relay.get_job(job["id"])
    assert failed["state"] == "failed" and failed["error"]["code"] == "chain_nonce_taken", failed
    assert _versions(app, job["id"]) == [first.tx_hash]
    assert w3.eth.get_transaction_count(RELAYER, "pending") == old["nonce"] + 1
    assert relay.credits()["balance"] == balance
    with app.app_context(), unit_of_work(Mode.READ):
        assert held_credits(account_id(relay.did)) == 0


def test_a_transaction_a_reorganisation_dropped_is_sent_again_as_stored(app, anvil, identity, evm):
    w3 = anvil.w3
    job = evm.host_card(registration_card("Reorganised"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    with pytest.raises(NotYetConfirmed):
        run_host_card(app, job["id"])
    sent = sent_step(app, job["id"])
    dropped = w3.eth.get_transaction_receipt(sent.tx_hash)["blockHash"]

    w3.provider.make_request("anvil_reorg", [1, []])  # its block is replaced by an empty one
    with pytest.raises(TransactionNotFound):
        w3.eth.get_transaction_receipt(sent.tx_hash)
    assert w3.eth.get_transaction_count(RELAYER) == nonce

    with pytest.raises(NotYetConfirmed):
        run_host_card(app, job["id"])

    assert _versions(app, job["id"]) == [sent.tx_hash]  # the stored bytes, not a new signature
    mined = w3.eth.get_transaction_receipt(sent.tx_hash)
    assert mined["blockHash"] != dropped
    _mine(anvil, CONFIRMATIONS)
    run_host_card(app, job["id"])
    finished = evm.get_job(job["id"])
    assert finished["state"] == "succeeded", finished
    assert finished["result"]["transaction"]["blockNumber"] == mined["blockNumber"]
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1
    assert len(_registered(identity, finished["result"]["public_url"])) == 1


class LaggingNode:
    """A JSON-RPC endpoint in front of anvil that answers receipts it holds in `stale` from its own
    copy, as a node behind a load balancer that has not seen a reorganisation yet."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.stale = upstream, {}
        self.server = serve_on_loopback(self._answer, name="lagging-node")
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def _answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        request = json.loads(body)
        if request["method"] == "eth_getTransactionReceipt" and request["params"][0] in self.stale:
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": self.stale[request["params"][0]]}
            return "application/json", json.dumps(answer).encode()
        upstream = requests.post(self.upstream, data=body, headers={"Content-Type": "application/json"}, timeout=10)
        return "application/json", upstream.content


@pytest.fixture
def lagging(anvil) -> Iterator[LaggingNode]:
    node = LaggingNode(anvil.url)
    yield node
    node.server.shutdown()


def test_a_receipt_of_a_block_no_longer_canonical_does_not_count(app, anvil, evm, lagging, monkeypatch):
    w3 = anvil.w3
    job = evm.host_card(registration_card("Stale receipt"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    with pytest.raises(NotYetConfirmed):
        run_host_card(app, job["id"])
    sent = sent_step(app, job["id"])
    lagging.stale[sent.tx_hash] = w3.provider.make_request("eth_getTransactionReceipt", [sent.tx_hash])["result"]
    w3.provider.make_request("anvil_reorg", [1, []])
    _mine(anvil, 1 + CONFIRMATIONS)  # the stale receipt's block number has its confirmations
    change_settings(monkeypatch, app, CHAIN_TESTNET_RPC_URL=lagging.url, CHAIN_RPC_TIMEOUT="1")

    with pytest.raises(NotYetMined):  # the stale receipt is not taken: the stored bytes are sent again
        run_host_card(app, job["id"])

    assert evm.get_job(job["id"])["state"] == "running"
    mined = w3.eth.get_transaction_receipt(sent.tx_hash)
    assert mined["blockHash"].to_0x_hex() != lagging.stale[sent.tx_hash]["blockHash"]
    lagging.stale.clear()  # the node catches up
    _mine(anvil, CONFIRMATIONS)
    run_host_card(app, job["id"])
    finished = evm.get_job(job["id"])
    assert finished["state"] == "succeeded" and finished["result"]["transaction"]["blockNumber"] == mined["blockNumber"]
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1


def _follow(app) -> None:
    with app.app_context():
        follow_transactions.apply(throw=True)  # a failure raises here; no .get() (a worker in this process forbids it)


def test_beat_keeps_a_running_jobs_transaction_going_and_records_it(app, anvil, identity, relay):
    w3 = anvil.w3
    job = relay.host_card(registration_card("Followed"), wait=False)
    nonce = w3.eth.get_transaction_count(RELAYER)
    with pytest.raises(NotYetMined):
        run_host_card(app, job["id"])
    first = sent_step(app, job["id"])
    _follow(app)
    assert sent_step(app, job["id"]).mined_tx_hash is None

    _sent_long_ago(app, job["id"])
    _follow(app)  # beat replaces the stuck transaction
    replaced = sent_step(app, job["id"])
    assert replaced.tx_hash != first.tx_hash and _versions(app, job["id"]) == [first.tx_hash, replaced.tx_hash]

    _mine(anvil, 1)
    _follow(app)
    mined = sent_step(app, job["id"])
    block = w3.eth.get_block("latest")
    assert (mined.mined_tx_hash, mined.mined_block_number) == (replaced.tx_hash, block["number"])
    assert mined.mined_block_hash == block["hash"].to_0x_hex() and mined.confirmed_at is None

    w3.provider.make_request("anvil_reorg", [1, []])
    _follow(app)  # the dropped transaction is sent again, as stored
    assert sent_step(app, job["id"]).mined_tx_hash is None
    assert w3.eth.get_transaction(replaced.tx_hash)["blockNumber"] is None  # waiting in the pool

    _mine(anvil, 1 + CONFIRMATIONS)
    _follow(app)
    confirmed = sent_step(app, job["id"])
    assert confirmed.mined_tx_hash == replaced.tx_hash and confirmed.confirmed_at is not None
    assert confirmed.mined_block_hash != mined.mined_block_hash

    run_host_card(app, job["id"])  # the job's deferred run finds it
    finished = relay.get_job(job["id"])
    assert finished["state"] == "succeeded" and finished["result"]["transaction"]["txHash"] == replaced.tx_hash
    assert w3.eth.get_transaction_count(RELAYER) == nonce + 1
    assert len(_registered(identity, finished["result"]["public_url"])) == 1


def test_beat_follows_transactions_only_on_a_chain(app, monkeypatch):
    assert beat_schedule(app) == {}
    change_settings(monkeypatch, app, AGENT_REGISTRY_BACKEND="evm")
    assert beat_schedule(app)["chain-follow-transactions"]["task"] == "chain.follow_transactions"
