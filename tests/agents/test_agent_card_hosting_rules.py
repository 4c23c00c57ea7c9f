"""Card hosting rules over HTTP: size, shape, permissions, credits, organisations, concurrency."""

from __future__ import annotations

import threading

import pytest

from app.client.library import InsufficientCredits, OwnerNamedDeregistration, TesseraClient
from tests.support.agents import claim_key_over_http, registration_card


def _headers(client: TesseraClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {client._session_token}", "Content-Type": "application/json"}


def _card_of_size(size: int) -> bytes:
    skeleton = registration_card("Sized", pad="")
    body = skeleton.replace(b'"pad": ""', b'"pad": "' + b"x" * (size - len(skeleton)) + b'"')
    assert len(body) == size
    return body


def _state(live_server, client: TesseraClient) -> tuple[int, int, int]:
    """(balance, public card status, private card status) of the client's own DID."""
    with live_server.http() as http:
        balance = http.get("/api/account", headers=_headers(client)).json()["data"]["balance"]
        public = http.get(f"/api/agent-card/{client.did}").status_code
        private = http.get(f"/api/agents/{client.did}/card", headers=_headers(client)).status_code
    return balance, public, private


def _put(live_server, client: TesseraClient, did: str, body: bytes):
    with live_server.http() as http:
        return http.put(f"/api/agents/{did}/card", content=body, headers=_headers(client))


def test_16384_bytes_accepted_16385_refused_with_413(live_server, agent_client, wait_for_job):
    too_big = _put(live_server, agent_client, agent_client.did, _card_of_size(16385))
    assert too_big.status_code == 413
    assert too_big.json()["code"] == "card_too_large"
    assert _state(live_server, agent_client) == (1000, 404, 404)

    exact = _card_of_size(16384)
    accepted = _put(live_server, agent_client, agent_client.did, exact)
    assert accepted.status_code == 202, accepted.text
    assert accepted.headers["Location"].endswith(accepted.json()["data"]["id"])
    job = agent_client.wait_for_job(accepted.json()["data"]["id"])
    assert job["result"]["size"] == 16384
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{agent_client.did}").content == exact


@pytest.mark.parametrize(
    "body",
    [
        b'[{"name": "an array"}]',
        b"not json at all",
        b'{"name": "\xff\xfe broken utf-8"}',
        b'"a string"',
        b'{"a": NaN}',
        b'{"a": ' + b"[" * 8000 + b"]" * 8000 + b"}",
    ],
    ids=["array", "not-json", "invalid-utf8", "string", "nan", "nested-too-deeply"],
)
def test_non_object_bodies_are_refused_with_422_and_nothing_written(live_server, agent_client, body):
    answer = _put(live_server, agent_client, agent_client.did, body)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "invalid_card"
    assert _state(live_server, agent_client) == (1000, 404, 404)


def test_hosting_for_another_agents_did_is_refused(live_server, agent_client):
    other_key = claim_key_over_http(live_server)
    with TesseraClient(live_server.url, api_key=other_key) as other:
        other.authenticate()
        answer = _put(live_server, agent_client, other.did, registration_card("hijack"))
        assert answer.status_code == 403
        assert answer.json()["code"] == "not_allowed_for_did"
        assert _state(live_server, other) == (1000, 404, 404)
    assert _state(live_server, agent_client) == (1000, 404, 404)


def test_unknown_did_is_404(live_server, agent_client):
    answer = _put(live_server, agent_client, "did:tessera:" + "0" * 40, registration_card())
    assert answer.status_code == 404


def test_missing_session_is_401_with_challenge(live_server):
    with live_server.http() as http:
        answer = http.put(
            "/api/agents/did:tessera:" + "0" * 40 + "/card", content=b"{}", headers={"Content-Type": "application/json"}
        )
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_organisation_needs_consent_then_hosts_on_its_own_credits(live_server, agent_client, tmp_path):
    org_key = claim_key_over_http(live_server, kind="organisation")
    card = tmp_path / "card.json"
    card.write_bytes(registration_card("Owned agent card"))
    with TesseraClient(live_server.url, api_key=org_key, poll_interval=0.05) as org:
        org.authenticate()
        refused = _put(live_server, org, agent_client.did, card.read_bytes())
        assert refused.status_code == 403
        assert _state(live_server, agent_client) == (1000, 404, 404)

        request = org.consent_request(org.did, agent_client.did)
        assert request["state"] == "pending"
        assert request["consent_url"].startswith(live_server.url + "/consent/")
        with live_server.http() as http:
            page = http.get(request["consent_url"])
            assert page.status_code == 200 and agent_client.did in page.text
            assert page.headers["X-Frame-Options"] == "DENY"

        approved = agent_client.consent_approve(request["consent_url"], org.did)
        assert approved["result"] == {"agent": agent_client.did, "owner": org.did, "consent": request["id"]}

        job = org.host_card(card, owner=org.did, agent=agent_client.did)
        assert job["result"]["did"] == agent_client.did
        assert org.whoami()["balance"] == 990
        assert org.registry(agent_client.did)["owner"] == org.did
    assert _state(live_server, agent_client) == (1000, 200, 200)
    with pytest.raises(OwnerNamedDeregistration) as raised:
        agent_client.deregister_agent()
    assert raised.value.owner is not None and "cannot be deregistered" in str(raised.value)
    with live_server.http() as http:
        assert http.get(f"/api/did/{agent_client.did}").json()["controller"][1] == raised.value.owner


def test_agent_account_cannot_request_consent(live_server, agent_client):
    other_key = claim_key_over_http(live_server)
    with TesseraClient(live_server.url, api_key=other_key) as other:
        other.authenticate()
        with live_server.http() as http:
            answer = http.post(
                "/api/consents",
                json={"owner": other.did, "agent": agent_client.did},
                headers={"Authorization": f"Bearer {other._session_token}"},
            )
    assert answer.status_code == 403
    assert answer.json()["code"] == "not_an_organisation"


def test_library_raises_insufficient_credits_with_figures(live_server):
    from app.agents.ethereum import generate_private_key

    with (
        TesseraClient(live_server.url, api_key=generate_private_key()) as client,
        pytest.raises(InsufficientCredits) as raised,
    ):
        client.host_card(registration_card("x"))
    assert (raised.value.required, raised.value.available) == (10, 0)


def test_two_concurrent_host_card_jobs_leave_identical_copies(live_server, agent_client, claimed_key, app):
    bodies = [registration_card(f"version {n}", pad="y" * 500 * n) for n in (1, 2)]
    clients = [TesseraClient(live_server.url, api_key=claimed_key, poll_interval=0.05) for _ in bodies]
    started: list = [None, None]

    def host(index: int) -> None:
        started[index] = clients[index].host_card(bodies[index], wait=False)

    threads = [threading.Thread(target=host, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    jobs = [client.wait_for_job(job["id"]) for client, job in zip(clients, started, strict=True)]
    assert all(job["state"] == "succeeded" for job in jobs)
    for client in clients:
        client.close()

    from app.agents.models import PrivateCard, PublicCard
    from app.extensions import db

    with app.app_context():
        private = db.session.get(PrivateCard, agent_client.did)
        public = db.session.get(PublicCard, agent_client.did)
        assert private.body == public.body and private.etag == public.etag
        assert private.job_id == public.job_id
        assert private.body in bodies
        stored = private.body
        db.session.rollback()
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{agent_client.did}").content == stored
    assert agent_client.whoami()["balance"] == 980


def test_idempotency_key_replays_the_first_job(live_server, agent_client):
    headers = {**_headers(agent_client), "Idempotency-Key": "host-once"}
    with live_server.http() as http:
        path = f"/api/agents/{agent_client.did}/card"
        first = http.put(path, content=registration_card("once"), headers=headers)
        second = http.put(path, content=registration_card("once"), headers=headers)
        different = http.put(path, content=registration_card("twice"), headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["data"]["id"] == second.json()["data"]["id"]
    assert different.status_code == 422
    agent_client.wait_for_job(first.json()["data"]["id"])
    assert agent_client.whoami()["balance"] == 990


def test_a_card_whose_did_service_names_another_did_is_refused(live_server, agent_client):
    """Spec 2.6: the card's DID service endpoint equals the agent's own DID."""
    other = "did:tessera:" + "ab" * 20
    foreign = registration_card("Impostor", services=[{"name": "DID", "endpoint": other, "version": "v1"}])
    refused = _put(live_server, agent_client, agent_client.did, foreign)
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["code"] == "invalid_card" and "services.0.endpoint" in problem["errors"]
    assert _state(live_server, agent_client) == (1000, 404, 404)

    own = registration_card("Honest", services=[{"name": "DID", "endpoint": agent_client.did, "version": "v1"}])
    accepted = _put(live_server, agent_client, agent_client.did, own)
    assert accepted.status_code == 202, accepted.text
    agent_client.wait_for_job(accepted.json()["data"]["id"])
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{agent_client.did}").content == own
