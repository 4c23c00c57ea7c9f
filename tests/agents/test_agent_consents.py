"""Organisation consents (app.agents.consents): the consent view and page, approvals."""

from __future__ import annotations

from tests.support.agents import (
    http_problem,
)


def test_consent_page_of_an_unknown_consent_is_a_404_problem(live_server):
    with live_server.http() as http:
        answer = http.get("/consent/" + "0" * 32)
    assert answer.status_code == 404
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert answer.json()["code"] == "not_found"


def test_approving_a_consent_id_that_cannot_exist_is_a_404(live_server, session):
    with live_server.http() as http:
        headers = {"Authorization": session["Authorization"]}
        answer = http.post("/api/consents/a%00b/approve", json={"signature": "0x00"}, headers=headers)
        assert http_problem(answer, 404)["code"] == "not_found"
