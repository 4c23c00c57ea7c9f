"""Public reads carry strong validators a cache can revalidate, and every change gives new ones."""

from __future__ import annotations

from tests.support.agents import registration_card


def test_a_did_document_has_a_strong_etag_and_answers_304_until_it_changes(live_server, agent_client):
    did = agent_client.did
    with live_server.http() as http:
        first = http.get(f"/api/did/{did}")
        etag = first.headers["etag"]
        assert first.status_code == 200 and etag.startswith('"') and not etag.startswith("W/")
        assert "max-age=" in first.headers["cache-control"] and "public" in first.headers["cache-control"]
        revalidated = http.get(f"/api/did/{did}", headers={"If-None-Match": etag})
        assert revalidated.status_code == 304 and revalidated.content == b""
        assert revalidated.headers["etag"] == etag
        # The full resolution result is another representation with a validator of its own.
        full = http.get(f"/api/did/{did}", headers={"Accept": "application/did-resolution"})
        assert full.headers["etag"] != etag and "Accept" in full.headers["vary"]

    agent_client.set_card("https://echo.example/.well-known/agent-card.json")
    with live_server.http() as http:
        changed = http.get(f"/api/did/{did}", headers={"If-None-Match": etag})
        assert changed.status_code == 200 and changed.json()["service"]
        assert changed.headers["etag"] != etag
        etag = changed.headers["etag"]

    agent_client.deregister_agent()
    with live_server.http() as http:
        gone = http.get(f"/api/did/{did}", headers={"If-None-Match": etag})
        assert gone.status_code == 410 and gone.json()["didDocumentMetadata"]["deactivated"] is True


def test_a_republished_card_gets_a_new_etag_and_an_unpublished_one_is_not_revalidated(live_server, agent_client):
    agent_client.host_card(registration_card("First"))
    with live_server.http() as http:
        etag = http.get(f"/api/agent-card/{agent_client.did}").headers["etag"]
    agent_client.host_card(registration_card("Second"))
    with live_server.http() as http:
        fresh = http.get(f"/api/agent-card/{agent_client.did}", headers={"If-None-Match": etag})
        assert fresh.status_code == 200 and b"Second" in fresh.content and fresh.headers["etag"] != etag
        etag = fresh.headers["etag"]
    agent_client.card_unpublish()
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{agent_client.did}", headers={"If-None-Match": etag}).status_code == 404
