"""Plain public reads are answered before dispatch: same bytes, headers and metrics as every other answer."""

from __future__ import annotations

import re

from tests.support.agents import registration_card


def _responses_total(http, endpoint: str, status: int) -> float:
    text = http.get("/metrics").text
    labels = rf'[^}}]*endpoint="{re.escape(endpoint)}"[^}}]*status="{status}"[^}}]*'
    return sum(float(value) for value in re.findall(rf"tessera_http_responses_total\{{{labels}\}} (\S+)", text))


def test_a_card_read_carries_the_card_headers_the_request_id_and_is_counted(live_server, agent_client):
    card = registration_card("Fast")
    agent_client.host_card(card)
    path = f"/api/agent-card/{agent_client.did}"
    with live_server.http() as http:
        before = _responses_total(http, "/api/agent-card/<string:did>", 200)
        answer = http.get(path, headers={"X-Request-Id": "fast-path-1"})
        assert answer.status_code == 200 and answer.content == card
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["x-request-id"] == "fast-path-1"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["content-security-policy"] == "sandbox; default-src 'none'"
        assert re.fullmatch(r"public, max-age=\d+", answer.headers["cache-control"])
        assert http.get(path, headers={"X-Request-Id": "bad id!"}).headers["x-request-id"] != "bad id!"
        etag = answer.headers["etag"]
        assert http.get(path, headers={"If-None-Match": etag}).status_code == 304
        assert http.get(path, headers={"If-None-Match": f"W/{etag}"}).status_code == 200  # strong comparison
        assert _responses_total(http, "/api/agent-card/<string:did>", 200) == before + 3
        # HEAD and other methods still reach the view (and its method rules).
        assert http.head(path).status_code == 200
        assert http.post(path).status_code == 405


def test_a_did_document_read_follows_every_change_at_once(live_server, agent_client):
    did = agent_client.did
    with live_server.http() as http:
        first = http.get(f"/api/did/{did}")
        assert first.status_code == 200 and first.headers["content-type"] == "application/did+json"
        assert "service" not in first.json() and first.headers["vary"] == "Accept"
        assert http.get(f"/api/did/{did}").content == first.content  # served again from the process cache
    agent_client.set_card("https://fast.example/.well-known/agent-card.json")
    with live_server.http() as http:
        changed = http.get(f"/api/did/{did}")
        assert changed.json()["service"][0]["serviceEndpoint"] == "https://fast.example/.well-known/agent-card.json"
        full = http.get(f"/api/did/{did}", headers={"Accept": "application/did-resolution"})
        assert full.headers["content-type"] == "application/did-resolution" and "didDocument" in full.json()
        assert http.get(f"/api/did/{did.upper()}").status_code == 400
    agent_client.deregister_agent()
    with live_server.http() as http:
        assert http.get(f"/api/did/{did}").status_code == 410
