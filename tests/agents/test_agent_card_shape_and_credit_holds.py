"""host-card checks the ERC-8004 registration-file shape before charging, and an accepted request
holds its price: a 202 always means the job can pay, and a failed job gives its hold back."""

from __future__ import annotations

import threading

import pytest

from app.agents.ethereum import address_from_private_key, generate_private_key
from app.agents.registration_file import REGISTRATION_TYPE
from app.client.library import TesseraClient
from tests.support.agents import registration_card


def _headers(client: TesseraClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {client._session_token}", "Content-Type": "application/json"}


def test_an_empty_object_is_a_422_naming_the_missing_fields_and_charges_nothing(live_server, agent_client):
    with live_server.http() as http:
        answer = http.put(f"/api/agents/{agent_client.did}/card", content=b"{}", headers=_headers(agent_client))
        assert answer.status_code == 422, answer.text
        assert answer.headers["Content-Type"] == "application/problem+json"
        problem = answer.json()
        assert problem["code"] == "invalid_card"
        assert set(problem["errors"]) == {"type", "name", "description", "services"}
        assert "description, name, services, type" in problem["detail"]
        assert http.get(f"/api/agent-card/{agent_client.did}").status_code == 404
    ledger = agent_client.credits()
    assert ledger["balance"] == 1000
    assert [entry["reason"] for entry in ledger["entries"]] == ["testnet-claim"]


BAD_MEMBERS = {
    "another type": ({"type": "https://example.org/card"}, "type"),
    "an empty name": ({"name": " "}, "name"),
    "a numeric description": ({"description": 7}, "description"),
    "services that are an object": ({"services": {"name": "A2A"}}, "services"),
    "a service without endpoint": ({"services": [{"name": "A2A"}]}, "services.0.endpoint"),
    "a service that is text": ({"services": ["https://agent.example"]}, "services.0"),
    "endpoints with a numeric version": (
        {"endpoints": [{"name": "MCP", "endpoint": "https://a.example/mcp", "version": 2}]},
        "endpoints.0.version",
    ),
    "registrations that are text": ({"registrations": "eip155:1:0x0"}, "registrations"),
    "a registration without agentId": (
        {"registrations": [{"agentRegistry": "eip155:1:0x" + "ab" * 20}]},
        "registrations.0.agentId",
    ),
    "a registration with a bad registry": (
        {"registrations": [{"agentId": 3, "agentRegistry": "0x" + "ab" * 20}]},
        "registrations.0.agentRegistry",
    ),
    "a numeric image": ({"image": 1}, "image"),
    "a textual x402Support": ({"x402Support": "yes"}, "x402Support"),
}


@pytest.mark.parametrize("case", sorted(BAD_MEMBERS))
def test_a_card_breaking_the_registration_shape_is_named_field_by_field(live_server, agent_client, case):
    members, field = BAD_MEMBERS[case]
    with live_server.http() as http:
        path = f"/api/agents/{agent_client.did}/card"
        answer = http.put(path, content=registration_card(**members), headers=_headers(agent_client))
    assert answer.status_code == 422, answer.text
    assert list(answer.json()["errors"]) == [field]
    assert agent_client.credits()["balance"] == 1000


def test_a_card_holding_a_lone_surrogate_is_refused_naming_the_string(live_server, agent_client):
    card = registration_card(description="MARKER").replace(b'"MARKER"', b'"a\\ud800b"')
    with live_server.http() as http:
        answer = http.put(f"/api/agents/{agent_client.did}/card", content=card, headers=_headers(agent_client))
        assert answer.status_code == 422, answer.text
        assert answer.json()["code"] == "invalid_card"
        assert "/description holds an unpaired surrogate" in answer.json()["errors"]["card"][0]
        assert http.get(f"/api/agent-card/{agent_client.did}").status_code == 404
    assert agent_client.credits()["balance"] == 1000


def test_the_older_endpoints_list_and_registrations_are_accepted(live_server, agent_client):
    card = registration_card(
        "Registered",
        services=None,
        endpoints=[{"name": "MCP", "endpoint": "https://a.example/mcp", "version": "2025-06-18"}],
        registrations=[{"agentId": 22, "agentRegistry": "eip155:1:0x" + "ab" * 20}],
        supportedTrust=["reputation"],
        active=True,
    ).replace(b'"services": null, ', b"")
    assert b'"services"' not in card and REGISTRATION_TYPE.encode() in card
    job = agent_client.host_card(card)
    assert job["state"] == "succeeded"
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{agent_client.did}").content == card


def test_120_concurrent_requests_for_100_cards_worth_accept_exactly_100(live_server, agent_client, wait_for_job):
    """The claim grants 1000 credits and a card costs 10: exactly 100 requests may be accepted."""
    answers: list = [None] * 120
    start = threading.Barrier(len(answers))

    def host(index: int) -> None:
        with live_server.http() as http:
            start.wait()
            answers[index] = http.put(
                f"/api/agents/{agent_client.did}/card",
                content=registration_card(f"card {index}"),
                headers=_headers(agent_client),
            )

    threads = [threading.Thread(target=host, args=(index,)) for index in range(len(answers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses.count(202) == 100 and statuses.count(402) == 20, statuses
    refused = [answer.json() for answer in answers if answer.status_code == 402]
    assert all(problem["code"] == "insufficient_credits" and problem["required"] == 10 for problem in refused)
    jobs = [wait_for_job(answer.json()["data"]["id"], timeout=120) for answer in answers if answer.status_code == 202]
    assert [job["state"] for job in jobs] == ["succeeded"] * 100
    ledger = agent_client.credits()
    assert ledger["balance"] == 0
    assert sum(1 for entry in ledger["entries"] if entry["reason"] == "host-card") == 100


def test_a_failed_job_releases_its_hold(app, live_server, outbox, wait_for_job):
    key = generate_private_key()
    granted = app.test_cli_runner().invoke(args=["agents", "grant-credits", address_from_private_key(key), "12"])
    assert granted.exit_code == 0, granted.output
    with TesseraClient(live_server.url, api_key=key, poll_interval=0.05, job_timeout=30) as client:
        assert client.host_card(registration_card("Held"))["result"]["balance"] == 2
        outbox.hold()
        with live_server.http() as http:
            path = f"/api/agents/{client.did}/card/public"
            first, second = (http.delete(path, headers=_headers(client)) for _ in range(2))
            assert first.status_code == second.status_code == 202
            # Both holds count, although no job has run yet: nothing is left to promise.
            third = http.delete(path, headers=_headers(client))
            assert third.status_code == 402 and third.json()["available"] == 0
            assert client.credits()["balance"] == 2

            outbox.release()
            finished = [wait_for_job(answer.json()["data"]["id"]) for answer in (first, second)]
            # One job unpublished the card; the other found none and failed without charging.
            assert sorted(job["state"] for job in finished) == ["failed", "succeeded"]
            assert client.credits()["balance"] == 1
            again = http.put(f"/api/agents/{client.did}/card", content=registration_card(), headers=_headers(client))
            assert again.status_code == 402 and again.json()["available"] == 1
