"""docs/chain.md's local node, started as the page says (anvil with a block time): a host-card job
confirms with the default `CHAIN_CONFIRMATIONS` (2) without anyone mining a block by hand, which a
node that mines only on demand never does."""

from __future__ import annotations

import shlex
import subprocess
import time

from eth_account import Account
from web3 import Web3

from app.chain.deploy import deploy_contracts
from app.chain.errors import NotYetConfirmed, NotYetMined
from app.chain.settings import ChainSettings
from app.client.library import TesseraClient
from app.jobs import service as jobs
from app.settings import current
from tests.chain.conftest import CHAIN_ID, RELAYER, _free_port, installed_packages, run_host_card
from tests.support.agents import claim_key_over_http, registration_card
from tests.support.config import change_settings
from tests.support.docs import DOCS_DIR, blocks
from tests.support.environment import REPO_ROOT, TMP_DIR


def _docs_node_command() -> list[str]:
    """The page's line that starts the node, as a shell would split it."""
    [block] = [block for block in blocks(DOCS_DIR / "chain.md") if block.language == "bash" and "anvil" in block.text]
    install, start = block.text.splitlines()
    assert install == "(cd app/chain && npm ci --no-audit --no-fund)"
    return shlex.split(start)


def test_the_docs_local_node_confirms_a_host_card_with_the_default_confirmations(app, server, monkeypatch):
    command = _docs_node_command()
    assert command[0] == "app/chain/node_modules/.bin/anvil" and "--block-time" in command
    installed_packages()
    port = _free_port()
    with open(TMP_DIR / f"docs-anvil-{port}.log", "wb") as log:
        node = subprocess.Popen([*command, "--port", str(port)], cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        w3 = Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}"))
        deadline = time.monotonic() + 30
        while not w3.is_connected():
            assert node.poll() is None and time.monotonic() < deadline, "the page's anvil did not start"
            time.sleep(0.1)
        assert w3.eth.chain_id == CHAIN_ID  # the page's CHAIN_TESTNET_CHAIN_ID
        # A relayer of this node's own, funded by its first development account: the session's node has
        # the same chain id, and Tessera keeps the next nonce of a relayer per chain id and address.
        relayer = Account.create()
        funding = w3.eth.send_transaction({"from": RELAYER, "to": relayer.address, "value": 10**19})
        w3.eth.wait_for_transaction_receipt(funding, timeout=30)
        deployment = deploy_contracts(w3, relayer.key)
        change_settings(
            monkeypatch,
            app,
            AGENT_REGISTRY_BACKEND="evm",
            AGENT_NETWORK="testnet",
            AGENT_NETWORK_URL=server.url,
            AGENT_CLAIM_RATE_LIMIT="10000 per hour",
            AGENT_CHALLENGE_RATE_LIMIT="10000 per minute",
            CHAIN_TESTNET_RPC_URL=f"http://127.0.0.1:{port}",
            CHAIN_TESTNET_CHAIN_ID=str(CHAIN_ID),
            CHAIN_TESTNET_REGISTRY_ADDRESS=deployment.registry_address,
            CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS=deployment.identity_registry_address,
            CHAIN_RELAYER_KEY=relayer.key.to_0x_hex(),
        )
        with app.app_context():
            assert current(ChainSettings).confirmations == 2  # the default, not the tests' own
        monkeypatch.setattr(jobs, "_broker_down_until", time.monotonic() + 3600)  # the test runs the job
        with TesseraClient(server.url, api_key=claim_key_over_http(server)) as agent:
            job = agent.host_card(registration_card("Local"), wait=False)
            first_block = w3.eth.block_number
            deadline = time.monotonic() + 60
            while agent.get_job(job["id"])["state"] not in ("succeeded", "failed"):
                assert time.monotonic() < deadline, "the job did not confirm within a minute"
                try:
                    run_host_card(app, job["id"])
                except (NotYetMined, NotYetConfirmed):
                    time.sleep(0.5)
            finished = agent.get_job(job["id"])
        assert finished["state"] == "succeeded", finished
        assert w3.eth.block_number >= finished["result"]["transaction"]["blockNumber"] + 2 > first_block
    finally:
        node.terminate()
        node.wait(timeout=10)
