"""Hardening of the agent network API found by fuzzing its HTTP surface (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from tests.support.agents import claim_key_over_http
from tests.tenancy.support import undocumented_error_statuses


@pytest.fixture
def session(live_server, agent_client) -> dict:
    return {"Authorization": f"Bearer {agent_client._session_token}", "did": agent_client.did}


def _is_problem(answer, status: int) -> dict:
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"] == "application/problem+json"
    return answer.json()


def test_agent_operations_document_every_error_they_can_answer(app):
    spec = app.test_client().get("/openapi.json").get_json()
    missing = undocumented_error_statuses(spec, ("/api/", "/claim", "/consent/"))
    # Design 9: a card that is not JSON is a 422 invalid_card, never a 400.
    assert missing == {"PUT /api/agents/{did}/card": {"400"}}
    claim = spec["paths"]["/claim"]["post"]
    assert "application/x-www-form-urlencoded" in claim["requestBody"]["content"]
    assert claim["responses"]["400"]["content"] == {"text/html": {}}
    assert "404" in spec["paths"]["/consent/{consent_id}"]["get"]["responses"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/agent-card/did:tessera:a%00b",
        "/api/agent-card/did:tessera:" + "ab" * 20 + "%0A",
        "/consent/a%00b",
        "/consent/" + "A" * 32,
    ],
)
def test_public_reads_of_ids_that_cannot_exist_are_404_problems(live_server, path):
    with live_server.http() as http:
        assert _is_problem(http.get(path), 404)["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/jobs/a%00b", "/api/consents/a%00b", "/api/jobs/not-a-job"])
def test_authenticated_reads_of_ids_that_cannot_exist_are_404_problems(live_server, session, path):
    with live_server.http() as http:
        answer = http.get(path, headers={"Authorization": session["Authorization"]})
        assert _is_problem(answer, 404)["code"] == "not_found"


def test_approving_a_consent_id_that_cannot_exist_is_a_404(live_server, session):
    with live_server.http() as http:
        headers = {"Authorization": session["Authorization"]}
        answer = http.post("/api/consents/a%00b/approve", json={"signature": "0x00"}, headers=headers)
        assert _is_problem(answer, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "authenticated"),
    [("/api/auth/challenge", False), ("/api/auth/verify", False), ("/api/consents", True)],
)
def test_bodies_that_are_not_json_are_documented_400_and_415_problems(live_server, session, path, authenticated):
    headers = {"Authorization": session["Authorization"]} if authenticated else {}
    with live_server.http() as http:
        malformed = http.post(path, content=b"\x00", headers={**headers, "Content-Type": "application/json"})
        assert _is_problem(malformed, 400)["code"] == "malformed_json"
        text = http.post(path, content=b"{}", headers={**headers, "Content-Type": "text/plain"})
        assert _is_problem(text, 415)["code"] == "unsupported_media_type"


def test_a_claim_form_without_its_token_is_an_html_400_and_issues_nothing(live_server):
    with live_server.http() as http:
        answer = http.post("/claim", data={"kind": "agent"})
    assert answer.status_code == 400
    assert answer.headers["Content-Type"].startswith("text/html")
    assert 'id="agent-key"' not in answer.text
    assert claim_key_over_http(live_server).startswith("0x")


def test_a_card_uri_with_a_trailing_newline_is_a_422_and_charges_nothing(live_server, session):
    headers = {"Authorization": session["Authorization"]}
    with live_server.http() as http:
        before = http.get("/api/credits", headers=headers).json()["data"]["balance"]
        path = f"/api/agents/{session['did']}/registry/card-uri"
        answer = http.put(path, json={"uri": "https://example.org/card\n"}, headers=headers)
        assert "uri" in _is_problem(answer, 422)["errors"]
        assert http.get("/api/credits", headers=headers).json()["data"]["balance"] == before
