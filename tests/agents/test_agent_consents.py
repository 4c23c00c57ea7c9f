"""Organisation consents (app.agents.consents): the consent view and page, approvals."""

from __future__ import annotations

from app.client.library import TesseraClient
from tests.support.agents import claim_key_over_http, http_problem


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


def test_consent_views_and_job_results_name_every_field(live_server, agent_client):
    with TesseraClient(
        live_server.url, api_key=claim_key_over_http(live_server, "organisation"), poll_interval=0.05, job_timeout=30
    ) as org:
        org.authenticate()
        consent = org.consent_request(org.did, agent_client.did)
        assert consent == {
            "id": consent["id"],
            "owner": org.did,
            "agent": agent_client.did,
            "state": "pending",
            "message": consent["message"],
            "consent_url": f"{live_server.url}/consent/{consent['id']}",
            "created_at": consent["created_at"],
            "expires_at": consent["expires_at"],
            "approved_at": None,
        }
        with live_server.http() as http:
            page = http.get(f"/consent/{consent['id']}")
        assert page.status_code == 200 and consent["id"] in page.text and org.did in page.text
        approved = agent_client.consent_approve(consent["consent_url"], org.did)["result"]
        assert approved == {"agent": agent_client.did, "owner": org.did, "consent": consent["id"]}
        seen = org.get_consent(consent["id"])
        assert seen["state"] == "approved" and seen["approved_at"].endswith("Z")
        assert agent_client.revoke_owner()["result"] == {"agent": agent_client.did, "revoked_owner": org.did}
        assert org.get_consent(consent["id"])["state"] == "revoked"
