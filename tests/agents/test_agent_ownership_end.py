"""Ownership ends: a deregistered organisation loses its sessions, its sign-in and its agents, and
an agent can revoke its owner by a request signed with its key. All through HTTP."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner

from app.agents import ethereum
from app.agents.consent_message import OwnerRevocation, format_revocation_message
from app.agents.siwe import format_date_time
from app.client.cli import main
from app.client.library import AuthenticationFailed, TesseraClient
from tests.support.agents import claim_key_over_http, registration_card


@dataclass
class Ownership:
    org: TesseraClient
    org_key: str
    agent: TesseraClient
    agent_key: str
    consent_id: str


def _bearer(client: TesseraClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {client._session_token}"}


def _own(live_server, org: TesseraClient, agent: TesseraClient) -> str:
    request = org.consent_request(org.did, agent.did)
    agent.consent_approve(request["consent_url"], org.did)
    return request["id"]


@pytest.fixture
def owned(live_server, agent_client, claimed_key):
    org_key = claim_key_over_http(live_server, kind="organisation")
    with TesseraClient(live_server.url, api_key=org_key, poll_interval=0.05, job_timeout=30) as org:
        org.authenticate()
        consent_id = _own(live_server, org, agent_client)
        assert org.host_card(registration_card("Owned"), owner=org.did, agent=agent_client.did)["state"] == "succeeded"
        yield Ownership(org, org_key, agent_client, claimed_key, consent_id)


def _revocation(live_server, ownership: Ownership, **changes) -> dict[str, str]:
    """A revocation request body signed with the agent key (``changes`` alter the terms or the key)."""
    key = changes.pop("key", ownership.agent_key)
    terms = {
        "network_host": urlparse(live_server.url).netloc,
        "agent_did": ownership.agent.did,
        "owner_did": ownership.org.did,
        "issued_at": format_date_time(datetime.now(UTC)),
        **changes,
    }
    signature = ethereum.sign_personal_message(format_revocation_message(OwnerRevocation(**terms)), key)
    return {"owner": terms["owner_did"], "issued_at": terms["issued_at"], "signature": signature}


def _revoke(live_server, caller: TesseraClient, agent_did: str, body: dict):
    with live_server.http() as http:
        return http.post(f"/api/agents/{agent_did}/owner/revoke", json=body, headers=_bearer(caller))


def test_a_deregistered_organisation_loses_its_sessions_and_cannot_sign_in_again(live_server, owned):
    old_session = _bearer(owned.org)
    job = owned.org.deregister_agent()
    assert job["result"]["deactivated"] is True and job["result"]["released_agents"] == 1
    with live_server.http() as http:
        answer = http.get("/api/account", headers=old_session)
        assert answer.status_code == 401 and answer.json()["code"] == "account_deactivated"
        put = http.put(
            f"/api/agents/{owned.agent.did}/card",
            content=registration_card("After"),
            headers={**old_session, "Content-Type": "application/json"},
        )
        assert put.status_code == 401
    with TesseraClient(live_server.url, api_key=owned.org_key) as again, pytest.raises(AuthenticationFailed) as refused:
        again.authenticate()
    assert "deregistered" in str(refused.value)
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": owned.org_key, "TESSERA_ENV": "testnet"}
    answer = CliRunner().invoke(main, ["--json", "credits"], env=env)
    assert answer.exit_code != 0
    error = json.loads(answer.stdout)["error"]
    assert error["kind"] == "AccountDeactivated" and error["did"] == owned.org.did


def test_deregistering_an_organisation_releases_its_agents(live_server, owned):
    owned.org.deregister_agent()
    record = owned.agent.registry(owned.agent.did)
    assert record["owner"] is None
    assert "controller" not in owned.agent.get_did(owned.agent.did)
    with live_server.http() as http:
        consent = http.get(f"/api/consents/{owned.consent_id}", headers=_bearer(owned.agent)).json()["data"]
    assert consent["state"] == "revoked"
    # Free again: the agent can leave the network by itself (refused with 409 while owned).
    assert owned.agent.deregister_agent()["result"]["deactivated"] is True


def test_a_job_the_organisation_queued_fails_once_it_is_deregistered(live_server, owned, outbox, wait_for_job):
    balance = owned.org.whoami()["balance"]
    outbox.hold()
    queued = owned.org.host_card(registration_card("Queued"), owner=owned.org.did, agent=owned.agent.did, wait=False)
    outbox.resume()
    owned.org.deregister_agent()
    outbox.release()
    job = wait_for_job(queued["id"])
    assert job["state"] == "failed" and job["error"]["code"] == "did_deactivated"
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{owned.agent.did}").json()["name"] == "Owned"
    assert owned.agent.credits()["balance"] == 1000
    assert balance == 990


def test_an_agent_revokes_its_owner_by_a_signed_request(live_server, owned, wait_for_job):
    answer = _revoke(live_server, owned.agent, owned.agent.did, _revocation(live_server, owned))
    assert answer.status_code == 202, answer.text
    job = wait_for_job(answer.json()["data"]["id"])
    assert job["state"] == "succeeded"
    assert job["result"] == {"agent": owned.agent.did, "revoked_owner": owned.org.did}
    assert owned.agent.registry(owned.agent.did)["owner"] is None
    with live_server.http() as http:
        refused = http.put(
            f"/api/agents/{owned.agent.did}/card",
            content=registration_card("Not yours"),
            headers={**_bearer(owned.org), "Content-Type": "application/json"},
        )
        assert refused.status_code == 403 and refused.json()["code"] == "not_allowed_for_did"
        consent = http.get(f"/api/consents/{owned.consent_id}", headers=_bearer(owned.org)).json()["data"]
        assert consent["state"] == "revoked"
    assert owned.agent.deregister_agent()["result"]["deactivated"] is True


def test_a_queued_job_of_the_revoked_owner_fails(live_server, owned, outbox, wait_for_job):
    outbox.hold()
    queued = owned.org.host_card(registration_card("Late"), owner=owned.org.did, agent=owned.agent.did, wait=False)
    outbox.resume()
    assert owned.agent.revoke_owner()["state"] == "succeeded"
    outbox.release()
    job = wait_for_job(queued["id"])
    assert job["state"] == "failed" and job["error"]["code"] == "not_allowed_for_did"
    assert owned.org.whoami()["balance"] == 990


REFUSED = {
    "signed by another key": (lambda: {"key": ethereum.generate_private_key()}, 422, "signature"),
    "issued an hour ago": (
        lambda: {"issued_at": format_date_time(datetime.now(UTC) - timedelta(hours=1))},
        422,
        "issued_at",
    ),
    "for another network": (lambda: {"network_host": "tessera.example"}, 422, "signature"),
    "naming another owner": (lambda: {"owner_did": "did:tessera:" + "c3" * 20}, 409, None),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_revocation_that_does_not_hold_is_refused(live_server, owned, case):
    changes, status, field = REFUSED[case]
    answer = _revoke(live_server, owned.agent, owned.agent.did, _revocation(live_server, owned, **changes()))
    assert answer.status_code == status, answer.text
    if field:
        assert list(answer.json()["errors"]) == [field]
    else:
        assert answer.json()["code"] == "owner_not_named"
    assert owned.agent.registry(owned.agent.did)["owner"] == owned.org.did


def test_only_the_agent_itself_may_revoke(live_server, owned):
    answer = _revoke(live_server, owned.org, owned.agent.did, _revocation(live_server, owned))
    assert answer.status_code == 403
    assert owned.agent.registry(owned.agent.did)["owner"] == owned.org.did


def test_a_replayed_revocation_cannot_end_a_later_consent(live_server, owned, wait_for_job):
    signed = _revocation(live_server, owned)
    wait_for_job(_revoke(live_server, owned.agent, owned.agent.did, signed).json()["data"]["id"])
    _own(live_server, owned.org, owned.agent)
    replay = _revoke(live_server, owned.agent, owned.agent.did, signed)
    assert replay.status_code == 422 and list(replay.json()["errors"]) == ["issued_at"]
    assert owned.agent.registry(owned.agent.did)["owner"] == owned.org.did


def test_the_cli_revokes_the_owner_the_record_names(live_server, owned):
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": owned.agent_key, "TESSERA_ENV": "testnet"}
    result = CliRunner().invoke(main, ["agent", "revoke-owner", "--yes"], env=env)
    assert result.exit_code == 0, result.output
    assert f"{owned.agent.did} is no longer owned by {owned.org.did}" in result.output
    again = CliRunner().invoke(main, ["agent", "revoke-owner", "--yes"], env=env)
    assert again.exit_code == 1 and "names no owner" in again.output


def test_the_revocation_endpoint_is_documented(app):
    spec = app.test_client().get("/openapi.json").get_json()
    operation = spec["paths"]["/api/agents/{did}/owner/revoke"]["post"]
    assert "202" in operation["responses"] and "409" in operation["responses"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    name = schema["$ref"].rsplit("/", 1)[-1]
    assert set(spec["components"]["schemas"][name]["required"]) == {"owner", "issued_at", "signature"}
