"""Organisations' ownership with `AGENT_REGISTRY_BACKEND=evm` on a real node: the organisation signs the
write naming itself owner when it requests the consent, the agent the same write when it approves,
and the job relays both; the owner then signs its agent's set-card, and the agent releases its
owner with its own signature. After every step the contract is read back with eth_call, then the
index and the DID document. Refusals happen before anything is sent.

Requests go over HTTP to a live server; jobs are held in the outbox and run in process with the
worker's own `run_job`, as in test_registry_writes_on_chain.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner
from eth_account import Account

from app.agents import ethereum
from app.agents.consent_message import OwnerRevocation, format_revocation_message
from app.agents.siwe import format_date_time
from app.agents.tasks import approve_consent, revoke_owner, set_card
from app.chain.typed_data import ZERO_ADDRESS, sign_typed_data
from app.client.cli import main
from app.client.library import ApiError, TesseraClient
from app.jobs import service as jobs
from tests.chain.conftest import follow_index, indexed_record, jobs_run_in_process
from tests.chain.test_registry_contract import record
from tests.chain.test_registry_writes_on_chain import RELAYER, _run
from tests.support.agents import claim_key_over_http, http_problem
from tests.support.config import change_settings


@pytest.fixture
def evm(app, evm_settings, server, monkeypatch) -> Iterator[TesseraClient]:
    """The evm backend on the session's node with no confirmations to wait for, jobs held in the outbox;
    a signed-in agent's client."""
    change_settings(monkeypatch, app, **{**evm_settings, "CHAIN_CONFIRMATIONS": "0"})
    monkeypatch.setattr(jobs, "_broker_down_until", time.monotonic() + 3600)
    with TesseraClient(server.url, api_key=claim_key_over_http(server), poll_interval=0.05) as client:
        client.authenticate()
        yield client


@contextmanager
def _client(server, kind: str = "agent", key: str | None = None) -> Iterator[TesseraClient]:
    with TesseraClient(server.url, api_key=key or claim_key_over_http(server, kind), poll_interval=0.05) as client:
        client.authenticate()
        yield client


def test_an_approved_consent_names_the_owner_on_chain_who_then_writes_the_record(app, anvil, contracts, server, evm):
    w3, did, address = anvil.w3, evm.did, evm.address
    first = "https://agent.example/own.json"
    assert _run(app, evm, evm.set_card(first, wait=False), set_card)["state"] == "succeeded"

    with _client(server, "organisation") as org:
        consent = org.consent_request(org.did, did)  # the organisation signs a SetOwner
        done = _run(app, evm, evm.consent_approve(consent["consent_url"], org.did, wait=False), approve_consent)
        assert done["state"] == "succeeded", done
        assert [sent["step"] for sent in done["result"]["transactions"]] == ["record"]
        assert record(contracts, did) == (address, org.address, first)
        follow_index(app, anvil)
        assert indexed_record(app, did) == (address, org.address, first)
        assert evm.get_did(did)["controller"] == [did, org.did]
        assert evm.registry()["owner"] == org.did

        # The agent's own set-card is refused before anything is signed or sent; its owner's is relayed.
        second = "https://org.example/agent.json"
        nonce = w3.eth.get_transaction_count(RELAYER)
        with pytest.raises(ApiError) as refused:
            evm.set_card(second, wait=False)
        assert refused.value.code == "record_signed_by_another" and refused.value.problem["signer"] == org.address
        assert w3.eth.get_transaction_count(RELAYER) == nonce
        done = _run(app, org, org.set_card(second, agent=did, wait=False), set_card)
        assert done["state"] == "succeeded", done
        assert record(contracts, did) == (address, org.address, second)

        # The agent drops its owner with its own signature.
        done = _run(app, evm, evm.revoke_owner(org.did, wait=False), revoke_owner)
        assert done["state"] == "succeeded", done
        assert [sent["step"] for sent in done["result"]["transactions"]] == ["record"]
        assert record(contracts, did) == (address, ZERO_ADDRESS, second)
        follow_index(app, anvil)
        assert indexed_record(app, did) == (address, ZERO_ADDRESS, second)
        assert "controller" not in evm.get_did(did)
        assert evm.owner_of() is None
        with pytest.raises(ApiError) as refused:  # the organisation's key no longer writes the record
            org.set_card("https://org.example/late.json", agent=did, wait=False)
        assert refused.value.status == 403


def test_the_cli_commands_name_and_release_an_owner_on_chain_for_a_did_with_no_record_yet(
    app, anvil, contracts, server, evm, monkeypatch
):
    for name in ("TESSERA_ENV", "TESSERA_API_KEY", "TESSERA_PRODUCTION_URL"):
        monkeypatch.delenv(name, raising=False)
    agent_key, org_key = claim_key_over_http(server), claim_key_over_http(server, "organisation")
    runner = CliRunner()

    def tessera(key: str, *args: str) -> dict:
        result = runner.invoke(main, ["--json", *args], env={"TESSERA_NETWORK_URL": server.url, "TESSERA_API_KEY": key})
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    did, org_did = tessera(agent_key, "whoami")["did"], tessera(org_key, "whoami")["did"]
    agent, owner = Account.from_key(agent_key).address, Account.from_key(org_key).address
    assert record(contracts, did) == (ZERO_ADDRESS, ZERO_ADDRESS, "")
    link = tessera(org_key, "consent", "request", "--owner", org_did, "--agent", did)["consent_url"]
    uri = "https://org.example/cli/agent.json"
    with jobs_run_in_process(app, did, org_did):
        assert tessera(agent_key, "consent", "approve", link, "--owner", org_did, "--yes")["state"] == "succeeded"
        assert record(contracts, did) == (agent, owner, "")  # registered by the approval, naming the owner
        assert tessera(org_key, "set-card", "--uri", uri, "--agent", did)["state"] == "succeeded"
        assert record(contracts, did) == (agent, owner, uri)
        follow_index(app, anvil)  # revoke-owner reads the owner from the registry view, the index's
        assert tessera(agent_key, "agent", "revoke-owner", "--yes")["state"] == "succeeded"
    assert record(contracts, did) == (agent, ZERO_ADDRESS, uri)


def test_an_agent_releases_on_chain_the_owner_whose_deregistration_released_it_in_tesseras_tables(
    app, anvil, contracts, server, evm, monkeypatch
):
    """An organisation's deregistration releases its agents in Tessera's tables only; the chain still
    names it, so the agent's `revoke-owner` releases it there, and the agent writes its record again."""
    for name in ("TESSERA_ENV", "TESSERA_API_KEY", "TESSERA_PRODUCTION_URL"):
        monkeypatch.delenv(name, raising=False)
    agent_key, org_key = claim_key_over_http(server), claim_key_over_http(server, "organisation")
    runner = CliRunner()

    def tessera(key: str, *args: str) -> dict:
        result = runner.invoke(main, ["--json", *args], env={"TESSERA_NETWORK_URL": server.url, "TESSERA_API_KEY": key})
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    did, org_did = tessera(agent_key, "whoami")["did"], tessera(org_key, "whoami")["did"]
    agent, owner = Account.from_key(agent_key).address, Account.from_key(org_key).address
    link = tessera(org_key, "consent", "request", "--owner", org_did, "--agent", did)["consent_url"]
    with jobs_run_in_process(app, did, org_did):
        assert tessera(agent_key, "consent", "approve", link, "--owner", org_did, "--yes")["state"] == "succeeded"
        assert tessera(org_key, "agent", "deregister", "--yes")["state"] == "succeeded"
        assert record(contracts, did) == (agent, owner, "")  # the chain still names the organisation
        follow_index(app, anvil)
        assert indexed_record(app, did) == (agent, owner, "")
        assert tessera(agent_key, "agent", "revoke-owner", "--yes")["state"] == "succeeded"
        assert record(contracts, did) == (agent, ZERO_ADDRESS, "")
        uri = "https://agent.example/card.json"
        assert tessera(agent_key, "set-card", "--uri", uri)["state"] == "succeeded"  # its own key again
    assert record(contracts, did) == (agent, ZERO_ADDRESS, uri)
    follow_index(app, anvil)
    assert indexed_record(app, did) == (agent, ZERO_ADDRESS, uri)


def _post(http, token: str, path: str, body: dict):
    return http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})


def _typed_data(http, token: str, did: str, **body) -> dict:
    answer = _post(http, token, f"/api/agents/{did}/registry/typed-data", body)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def _signed(typed: dict, key) -> str:
    return "0x" + sign_typed_data(typed, key).hex()


def test_wrong_missing_and_stale_ownership_signatures_are_refused_before_anything_is_sent(
    app, anvil, contracts, server, evm
):
    w3, agent_key, stranger = anvil.w3, claim_key_over_http(server), Account.create().key
    with _client(server, key=agent_key) as agent, _client(server, "organisation") as org, server.http() as http:
        did, agent_token, org_token = agent.did, agent.authenticate()["token"], org.authenticate()["token"]
        nonce = w3.eth.get_transaction_count(RELAYER)

        # The organisation's request: its own key's signature of the write naming it, and nothing else.
        request = {"owner": org.did, "agent": did}
        problem = http_problem(_post(http, org_token, "/api/consents", request), 422)
        assert problem["code"] == "registry_signature_required" and set(problem["errors"]) == {"signature", "deadline"}
        to_sign = _typed_data(http, org_token, did, operation="set-owner", owner=org.did)
        assert to_sign["signer"] == org.address and to_sign["typed_data"]["primaryType"] == "Register"
        typed, deadline = to_sign["typed_data"], to_sign["typed_data"]["message"]["deadline"]
        signed = {**request, "signature": _signed(typed, stranger), "deadline": deadline}
        problem = http_problem(_post(http, org_token, "/api/consents", signed), 403)
        assert problem["code"] == "registry_signature_refused" and problem["expected"] == org.address
        as_agent = {"operation": "set-owner", "owner": org.did}
        problem = http_problem(_post(http, agent_token, f"/api/agents/{did}/registry/typed-data", as_agent), 403)
        assert problem["code"] == "not_an_organisation"
        consent = org.consent_request(org.did, did)

        # The agent's approval: its consent signature and its own key's signature of the same write.
        approve = f"/api/consents/{consent['id']}/approve"
        personal = ethereum.sign_personal_message(consent["message"], agent_key)
        problem = http_problem(_post(http, agent_token, approve, {"signature": personal}), 422)
        assert problem["code"] == "registry_signature_required" and set(problem["errors"]) == {"registry_signature"}
        to_sign = _typed_data(http, agent_token, did, operation="approve-consent", consent=consent["id"])
        assert to_sign["signer"] == agent.address and to_sign["typed_data"]["message"]["owner"] == org.address
        foreign = {"signature": personal, "registry_signature": _signed(to_sign["typed_data"], stranger)}
        problem = http_problem(_post(http, agent_token, approve, foreign), 403)
        assert problem["code"] == "registry_signature_refused" and problem["expected"] == agent.address

        assert w3.eth.get_transaction_count(RELAYER) == nonce  # nothing was sent for these refusals

        # A write of the record since the organisation signed moves its nonce: the consent must be asked again.
        done = _run(app, agent, agent.set_card("https://agent.example/first.json", wait=False), set_card)
        assert done["state"] == "succeeded", done
        nonce = w3.eth.get_transaction_count(RELAYER)
        again = {"operation": "approve-consent", "consent": consent["id"]}
        stale = http_problem(_post(http, agent_token, f"/api/agents/{did}/registry/typed-data", again), 409)
        assert stale["code"] == "consent_signature_stale"
        signed = {"signature": personal, "registry_signature": _signed(to_sign["typed_data"], agent_key)}
        assert http_problem(_post(http, agent_token, approve, signed), 409)["code"] == "consent_signature_stale"

        # Asked again, approved; the release then needs the agent's own signature.
        asked_again = org.consent_request(org.did, did)["id"]
        done = _run(app, agent, agent.consent_approve(asked_again, org.did, wait=False), approve_consent)
        assert done["state"] == "succeeded", done
        nonce = w3.eth.get_transaction_count(RELAYER)
        to_sign = _typed_data(http, agent_token, did, operation="revoke-owner", owner=org.did)
        assert to_sign["typed_data"]["message"]["owner"] == ZERO_ADDRESS and to_sign["signer"] == agent.address
        typed_data = f"/api/agents/{did}/registry/typed-data"
        problem = http_problem(_post(http, org_token, typed_data, {"operation": "revoke-owner", "owner": org.did}), 403)
        assert problem["code"] == "not_allowed_for_did"
        issued_at = format_date_time(datetime.now(UTC))
        revocation = format_revocation_message(OwnerRevocation(urlparse(server.url).netloc, did, org.did, issued_at))
        revoke = f"/api/agents/{did}/owner/revoke"
        body = {
            "owner": org.did,
            "issued_at": issued_at,
            "signature": ethereum.sign_personal_message(revocation, agent_key),
        }
        problem = http_problem(_post(http, agent_token, revoke, body), 422)
        assert problem["code"] == "registry_signature_required"
        assert set(problem["errors"]) == {"registry_signature", "deadline"}
        deadline = to_sign["typed_data"]["message"]["deadline"]
        forged = {**body, "registry_signature": _signed(to_sign["typed_data"], stranger), "deadline": deadline}
        problem = http_problem(_post(http, agent_token, revoke, forged), 403)
        assert problem["code"] == "registry_signature_refused" and problem["expected"] == agent.address
        assert w3.eth.get_transaction_count(RELAYER) == nonce  # nothing was sent for any refusal
    assert record(contracts, did)[1] == org.address
