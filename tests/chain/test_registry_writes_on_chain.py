"""set-card and deregister with `AGENT_REGISTRY_BACKEND=evm` on a real node: the library signs each
write with the agent key (the typed data the network hands out), the job relays it, and after every
step the contract is read back with eth_call, the identity's tokenURI too; the index follows, and the
DID document and the registry view come from it. Refusals happen before anything is sent.

Requests go over HTTP to a live server; jobs are held in the outbox and run in process with the
worker's own `run_job`, as in test_host_card_on_chain.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from eth_account import Account

from app.agents.credits import held_credits
from app.agents.tasks import deregister, host_card, set_card
from app.chain.typed_data import ZERO_ADDRESS, sign_typed_data
from app.client.cli import main
from app.client.library import OwnerNamedDeregistration, TesseraClient
from app.db import Mode, unit_of_work
from app.jobs import service as jobs
from app.jobs.service import run_job
from tests.chain.conftest import CHAIN_ID, RELAYER_KEY, follow_index, indexed_record, jobs_run_in_process
from tests.chain.test_registry_contract import Agent, record, register, relay
from tests.support.agents import account_id, claim_key_over_http, http_problem, registration_card
from tests.support.config import change_settings

RELAYER = Account.from_key(RELAYER_KEY).address


@pytest.fixture
def evm(app, anvil, contracts, server, monkeypatch) -> Iterator[TesseraClient]:
    """The evm backend on the session's node (no confirmations to wait for), jobs held in the outbox;
    a signed-in agent's client."""
    change_settings(
        monkeypatch,
        app,
        AGENT_REGISTRY_BACKEND="evm",
        AGENT_NETWORK="testnet",
        AGENT_NETWORK_URL=server.url,
        AGENT_CLAIM_RATE_LIMIT="10000 per hour",
        AGENT_CHALLENGE_RATE_LIMIT="10000 per minute",
        CHAIN_TESTNET_RPC_URL=anvil.url,
        CHAIN_TESTNET_CHAIN_ID=str(CHAIN_ID),
        CHAIN_TESTNET_REGISTRY_ADDRESS=contracts.registry.address,
        CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS=contracts.identity.address,
        CHAIN_RELAYER_KEY=RELAYER_KEY,
        CHAIN_CONFIRMATIONS="0",
        CHAIN_RPC_TIMEOUT="5",
    )
    monkeypatch.setattr(jobs, "_broker_down_until", time.monotonic() + 3600)
    with TesseraClient(server.url, api_key=claim_key_over_http(server), poll_interval=0.05) as client:
        client.authenticate()
        yield client


def _run(app, client: TesseraClient, job: dict, task) -> dict:
    with app.app_context():
        run_job(job["id"], task.handler)
    return client.get_job(job["id"])


def _held(app, did: str) -> int:
    with app.app_context(), unit_of_work(Mode.READ):
        return held_credits(account_id(did))


def test_set_card_and_deregister_are_signed_by_the_agent_and_written_on_chain(app, anvil, contracts, evm):
    hosted = _run(app, evm, evm.host_card(registration_card("Writes"), wait=False), host_card)
    agent_id = int(hosted["result"]["transaction"]["agentId"])
    did, address = evm.did, evm.address

    first = "https://agent.example/card.json"
    done = _run(app, evm, evm.set_card(first, wait=False), set_card)  # signs a Register: no record on chain yet
    assert done["state"] == "succeeded", done
    assert [sent["step"] for sent in done["result"]["transactions"]] == ["record", "identity-uri"]
    assert record(contracts, did) == (address, ZERO_ADDRESS, first)
    assert contracts.identity.functions.tokenURI(agent_id).call() == first

    follow_index(app, anvil)
    assert indexed_record(app, did) == (address, ZERO_ADDRESS, first)
    assert evm.get_did(did)["service"] == [{"id": f"{did}#agent", "type": "AgentService", "serviceEndpoint": first}]
    assert evm.registry()["card_uri"] == first

    second = "https://agent.example/v2/card.json"
    done = _run(app, evm, evm.set_card(second, wait=False), set_card)  # a SetCard now
    assert done["state"] == "succeeded", done
    assert record(contracts, did) == (address, ZERO_ADDRESS, second)
    assert contracts.identity.functions.tokenURI(agent_id).call() == second
    assert evm.get_did(did)["service"][0]["serviceEndpoint"] == first  # the index has not followed yet
    follow_index(app, anvil)
    assert evm.get_did(did)["service"][0]["serviceEndpoint"] == second

    done = _run(app, evm, evm.deregister_agent(wait=False), deregister)
    assert done["state"] == "succeeded", done
    # The record goes, and the identity (its token stays) says the agent is no longer active.
    assert [sent["step"] for sent in done["result"]["transactions"]] == ["record", "identity-uri"]
    assert record(contracts, did) == (ZERO_ADDRESS, ZERO_ADDRESS, "")
    assert contracts.identity.functions.tokenURI(agent_id).call().startswith("data:application/json;base64,")
    follow_index(app, anvil)
    assert indexed_record(app, did) is None
    assert evm.whoami()["deactivated"] is True


def _typed_data(http, token: str, did: str, **body) -> dict:
    answer = http.post(
        f"/api/agents/{did}/registry/typed-data", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["typed_data"]


def test_unsigned_foreign_and_expired_writes_are_refused_before_anything_is_sent(app, anvil, server, evm):
    w3, did, uri = anvil.w3, evm.did, "https://agent.example/refused.json"
    token = evm.authenticate()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    put = f"/api/agents/{did}/registry/card-uri"
    nonce = w3.eth.get_transaction_count(RELAYER)
    with server.http() as http:
        problem = http_problem(http.put(put, json={"uri": uri}, headers=auth), 422)
        assert problem["code"] == "registry_signature_required"
        assert set(problem["errors"]) == {"signature", "deadline"}

        typed = _typed_data(http, token, did, operation="set-card", uri=uri)
        assert typed["primaryType"] == "Register" and typed["message"]["nonce"] == 0
        deadline = typed["message"]["deadline"]
        foreign = "0x" + sign_typed_data(typed, Account.create().key).hex()
        signed = {"uri": uri, "signature": foreign, "deadline": deadline}
        problem = http_problem(http.put(put, json=signed, headers=auth), 403)
        assert problem["code"] == "registry_signature_refused" and problem["expected"] == evm.address

        past = w3.eth.get_block("latest")["timestamp"] - 60
        expired = {**typed, "message": {**typed["message"], "deadline": past}}
        signed = {"uri": uri, "signature": evm.sign_registry_write(expired, "set-card", did, uri), "deadline": past}
        assert http_problem(http.put(put, json=signed, headers=auth), 422)["code"] == "registry_signature_expired"

        signed = {"uri": uri, "signature": evm.sign_registry_write(typed, "set-card", did, uri), "deadline": deadline}
        for_another_uri = {**signed, "uri": "https://agent.example/other.json"}
        problem = http_problem(http.put(put, json=for_another_uri, headers=auth), 403)
        assert problem["code"] == "registry_signature_refused"
        assert w3.eth.get_transaction_count(RELAYER) == nonce  # nothing was sent

        # Two jobs signed with the same nonce: the second's signature no longer holds when it is sent.
        balance = evm.credits()["balance"]
        first = http.put(put, json=signed, headers={**auth, "Idempotency-Key": "first"}).json()["data"]
        stale = http.put(put, json=signed, headers={**auth, "Idempotency-Key": "stale"}).json()["data"]
    charged = _run(app, evm, first, set_card)["result"]["charged"]
    failed = _run(app, evm, stale, set_card)
    assert failed["state"] == "failed" and failed["error"]["code"] == "chain_transaction_reverted", failed
    assert _held(app, did) == 0
    assert evm.credits()["balance"] == balance - charged


def test_deregistering_a_record_that_names_an_owner_on_chain_is_refused_before_anything_is_sent(
    anvil, contracts, server, evm
):
    w3, owned, owner = anvil.w3, Agent(), Agent()
    with TesseraClient(server.url, api_key="0x" + owned.key.hex(), poll_interval=0.05) as client:
        owned.did = client.authenticate()["did"]
        relay(w3, register(w3, contracts, owned, owner=owner))
        nonce = w3.eth.get_transaction_count(RELAYER)
        with pytest.raises(OwnerNamedDeregistration) as refused:
            client.deregister_agent(wait=False)
        assert refused.value.problem["owner"] == owner.account.address
        assert w3.eth.get_transaction_count(RELAYER) == nonce
        assert record(contracts, owned.did)[1] == owner.account.address


def test_the_cli_commands_do_not_change_on_a_chain(app, anvil, contracts, server, evm, monkeypatch):
    for name in ("TESSERA_ENV", "TESSERA_API_KEY", "TESSERA_PRODUCTION_URL"):
        monkeypatch.delenv(name, raising=False)
    key = claim_key_over_http(server)
    env = {"TESSERA_NETWORK_URL": server.url, "TESSERA_API_KEY": key}
    runner = CliRunner()

    def tessera(*args: str) -> dict:
        result = runner.invoke(main, ["--json", *args], env=env)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    did = tessera("whoami")["did"]
    address = Account.from_key(key).address
    uri = "https://agent.example/cli/card.json"
    with jobs_run_in_process(app, did):
        assert tessera("set-card", "--uri", uri)["state"] == "succeeded"
        assert record(contracts, did) == (address, ZERO_ADDRESS, uri)
        assert tessera("agent", "deregister", "--yes")["state"] == "succeeded"
    assert record(contracts, did) == (ZERO_ADDRESS, ZERO_ADDRESS, "")
