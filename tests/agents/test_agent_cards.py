"""Cards (app.agents.cards): the private view, and card URIs registered in the registry."""

from __future__ import annotations

import json

from tests.support.agents import http_problem, registration_card


def test_set_card_uri_is_validated(live_server, agent_client):
    headers = {"Authorization": f"Bearer {agent_client._session_token}"}
    with live_server.http() as http:
        refused = (
            "relative/path",
            "https://x.example/" + "a" * 2048,
            "",
            "javascript:alert(1)",
            "JavaScript:alert(document.cookie)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox(1)",
            "file:///etc/passwd",
            "ftp://x.example/card.json",
            "https:///no-host",
            "http://[::1/card.json",
            "mailto:agent@x.example",
        )
        for uri in refused:
            answer = http.put(f"/api/agents/{agent_client.did}/registry/card-uri", json={"uri": uri}, headers=headers)
            assert answer.status_code == 422, uri
            assert "uri" in answer.json()["errors"], uri
        plain_http = http.put(
            f"/api/agents/{agent_client.did}/registry/card-uri",
            json={"uri": "http://127.0.0.1:8080/card.json"},
            headers=headers,
        )
        assert plain_http.status_code == 202, plain_http.text
        assert agent_client.wait_for_job(plain_http.json()["data"]["id"])["state"] == "succeeded"
        ok = http.put(
            f"/api/agents/{agent_client.did}/registry/card-uri",
            json={"uri": "https://x.example/" + "a" * (2048 - len("https://x.example/"))},
            headers=headers,
        )
    assert ok.status_code == 202
    assert agent_client.wait_for_job(ok.json()["data"]["id"])["state"] == "succeeded"
    document = agent_client.get_did(agent_client.did)
    assert document["service"][0]["serviceEndpoint"].startswith("https://x.example/")
    assert agent_client.credits()["balance"] == 1000 - 2 * 5


def test_a_card_uri_with_a_trailing_newline_is_a_422_and_charges_nothing(live_server, session):
    headers = {"Authorization": session["Authorization"]}
    with live_server.http() as http:
        before = http.get("/api/credits", headers=headers).json()["data"]["balance"]
        path = f"/api/agents/{session['did']}/registry/card-uri"
        answer = http.put(path, json={"uri": "https://example.org/card\n"}, headers=headers)
        assert "uri" in http_problem(answer, 422)["errors"]
        assert http.get("/api/credits", headers=headers).json()["data"]["balance"] == before


def test_card_view_and_job_results_name_every_field(live_server, agent_client):
    body = registration_card("Viewed")
    hosted = agent_client.host_card(body)["result"]
    public_url = f"{live_server.url}/api/agent-card/{agent_client.did}"
    etag = hosted["etag"]
    assert hosted["public_url"].endswith(f"/api/agent-card/{agent_client.did}")
    assert hosted == {
        "did": agent_client.did,
        "size": len(body),
        "etag": etag,
        # Written by the worker, which knows the network by its configured URL (not this test server's).
        "public_url": hosted["public_url"],
        "charged": 10,
        "balance": 990,
    }
    view = agent_client.get_card()
    assert view == {
        "did": agent_client.did,
        "published": True,
        "card": json.loads(body),
        "size": len(body),
        "etag": etag,
        "public_url": public_url,
        "updated_at": view["updated_at"],
    }
    assert view["updated_at"].endswith("Z")
    unpublished = agent_client.card_unpublish()["result"]
    assert unpublished == {"did": agent_client.did, "published": False, "charged": 1, "balance": 989}
    assert agent_client.get_card()["public_url"] is None
    uri = "https://agent.example/card.json"
    registered = agent_client.set_card(uri)["result"]
    assert registered == {"did": agent_client.did, "card_uri": uri, "charged": 5, "balance": 984}
