"""Public cards cannot be sniffed or run as pages; the claim cookie stays on this site and a claim
form posts once."""

from __future__ import annotations

import re

from tests.support.agents import registration_card

_KEY_RE = re.compile(r'<code id="agent-key">(0x[0-9a-f]{64})</code>')
_CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def test_a_public_card_is_served_with_nosniff_and_a_sandbox_policy(live_server, agent_client):
    agent_client.host_card(registration_card("<script>alert(1)</script>"))
    with live_server.http() as http:
        card = http.get(f"/api/agent-card/{agent_client.did}")
        revalidated = http.get(f"/api/agent-card/{agent_client.did}", headers={"If-None-Match": card.headers["etag"]})
    assert card.status_code == 200 and revalidated.status_code == 304
    for answer in (card, revalidated):
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_the_claim_cookie_is_httponly_and_samesite(live_server):
    with live_server.http() as http:
        page = http.get("/claim")
    cookie = page.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert "httponly" in attributes
    assert attributes["samesite"].lower() in ("samesite=lax", "samesite=strict")


def test_a_replayed_claim_form_post_is_refused(live_server):
    with live_server.http() as http:
        page = http.get("/claim")
        cookie = http.cookies["session"]
        token = _CSRF_RE.search(page.text).group(1)
        first = http.post("/claim", data={"csrf_token": token, "kind": "agent"})
    assert first.status_code == 200 and _KEY_RE.search(first.text)
    # The replay sends the form and the cookie exactly as they were when the form was loaded.
    with live_server.http() as replayer:
        replayer.cookies.set("session", cookie)
        replay = replayer.post("/claim", data={"csrf_token": token, "kind": "agent"})
    assert replay.status_code == 400
    assert replay.headers["Content-Type"].startswith("text/html")
    assert not _KEY_RE.search(replay.text)


def test_a_fresh_form_still_works_after_a_claim(live_server):
    with live_server.http() as http:
        for _ in range(2):
            token = _CSRF_RE.search(http.get("/claim").text).group(1)
            answer = http.post("/claim", data={"csrf_token": token, "kind": "agent"})
            assert answer.status_code == 200 and _KEY_RE.search(answer.text)
