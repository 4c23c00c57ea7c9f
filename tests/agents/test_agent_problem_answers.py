"""Problem answers of the agent network API found by fuzzing its HTTP surface: documented errors,
ids that cannot exist, bodies that are not JSON."""

from __future__ import annotations

import pytest

from tests.support.agents import (
    http_problem,
)
from tests.support.tenancy import undocumented_error_statuses


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
        assert http_problem(http.get(path), 404)["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/jobs/a%00b", "/api/consents/a%00b", "/api/jobs/not-a-job"])
def test_authenticated_reads_of_ids_that_cannot_exist_are_404_problems(live_server, session, path):
    with live_server.http() as http:
        answer = http.get(path, headers={"Authorization": session["Authorization"]})
        assert http_problem(answer, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "authenticated"),
    [("/api/auth/challenge", False), ("/api/auth/verify", False), ("/api/consents", True)],
)
def test_bodies_that_are_not_json_are_documented_400_and_415_problems(live_server, session, path, authenticated):
    headers = {"Authorization": session["Authorization"]} if authenticated else {}
    with live_server.http() as http:
        malformed = http.post(path, content=b"\x00", headers={**headers, "Content-Type": "application/json"})
        assert http_problem(malformed, 400)["code"] == "malformed_json"
        text = http.post(path, content=b"{}", headers={**headers, "Content-Type": "text/plain"})
        assert http_problem(text, 415)["code"] == "unsupported_media_type"
