"""Network API details: sign-in rules, DID resolution errors, pricing, contracts, claim page."""

from __future__ import annotations

import re
import uuid

import pytest

from app.agents import ethereum
from tests.agents.conftest import claim_key_over_http, registration_card
from tests.support.config import config_changed


def _challenge(http, address: str) -> str:
    answer = http.post("/api/auth/challenge", json={"address": address})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["message"]


def test_challenge_is_an_eip4361_message_for_this_network(live_server):
    key = ethereum.generate_private_key()
    address = ethereum.address_from_private_key(key)
    with live_server.http() as http:
        message = _challenge(http, address.lower())
    from app.agents.siwe import parse_message

    parsed = parse_message(message)
    assert parsed.address == address
    assert parsed.domain == live_server.url.removeprefix("http://")
    assert parsed.expiration_time > parsed.issued_at
    assert re.fullmatch(r"[0-9a-f]{32}", parsed.nonce)


def test_malformed_address_is_422(live_server):
    with live_server.http() as http:
        answer = http.post("/api/auth/challenge", json={"address": "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"})
    assert answer.status_code == 422
    assert "address" in answer.json()["errors"]


def test_signature_from_another_key_is_refused_and_nonce_survives(live_server):
    key, other = ethereum.generate_private_key(), ethereum.generate_private_key()
    with live_server.http() as http:
        message = _challenge(http, ethereum.address_from_private_key(key))
        wrong = http.post(
            "/api/auth/verify",
            json={"message": message, "signature": ethereum.sign_personal_message(message, other)},
        )
        assert wrong.status_code == 401
        assert wrong.headers["WWW-Authenticate"].startswith("Bearer")
        right = http.post(
            "/api/auth/verify", json={"message": message, "signature": ethereum.sign_personal_message(message, key)}
        )
        assert right.status_code == 200
        assert right.headers["Cache-Control"] == "no-store"


def test_a_nonce_is_spent_by_one_sign_in(live_server):
    key = ethereum.generate_private_key()
    with live_server.http() as http:
        message = _challenge(http, ethereum.address_from_private_key(key))
        body = {"message": message, "signature": ethereum.sign_personal_message(message, key)}
        assert http.post("/api/auth/verify", json=body).status_code == 200
        replay = http.post("/api/auth/verify", json=body)
    assert replay.status_code == 401
    assert replay.json()["code"] == "authentication_failed"


def test_high_s_signature_is_refused(live_server):
    key = ethereum.generate_private_key()
    with live_server.http() as http:
        message = _challenge(http, ethereum.address_from_private_key(key))
        raw = bytes.fromhex(ethereum.sign_personal_message(message, key)[2:])
        s = int.from_bytes(raw[32:64], "big")
        twin = raw[:32] + (ethereum.SECP256K1_ORDER - s).to_bytes(32, "big") + bytes([55 - raw[64]])
        answer = http.post("/api/auth/verify", json={"message": message, "signature": "0x" + twin.hex()})
    assert answer.status_code == 401
    assert "high-s" in answer.json()["detail"]


def test_altered_message_is_refused(live_server):
    key = ethereum.generate_private_key()
    with live_server.http() as http:
        message = _challenge(http, ethereum.address_from_private_key(key))
        altered = message.replace("Sign in to the Tessera agent network.", "Sign in somewhere else.")
        answer = http.post(
            "/api/auth/verify", json={"message": altered, "signature": ethereum.sign_personal_message(altered, key)}
        )
    assert answer.status_code == 401


def test_same_key_keeps_its_did(live_server):
    from app.client.library import TesseraClient

    key = ethereum.generate_private_key()
    with TesseraClient(live_server.url, api_key=key) as first, TesseraClient(live_server.url, api_key=key) as second:
        assert first.authenticate()["did"] == second.authenticate()["did"]


@pytest.mark.parametrize(
    ("did", "status", "error"),
    [
        ("not-a-did", 400, "INVALID_DID"),
        ("did:web:example.com", 400, "INVALID_DID"),
        ("did:tessera:" + "AB" * 20, 400, "INVALID_DID"),
        ("did:tessera:" + "ab" * 19, 400, "INVALID_DID"),
        ("did:tessera:" + "0" * 40, 404, "NOT_FOUND"),
    ],
)
def test_did_resolution_errors(live_server, did, status, error):
    with live_server.http() as http:
        answer = http.get(f"/api/did/{did}")
    assert answer.status_code == status
    result = answer.json()
    assert result["didDocument"] is None
    assert result["didResolutionMetadata"]["error"]["type"] == f"https://www.w3.org/ns/did#{error}"


def test_pricing_and_contract_version_are_public(live_server):
    with live_server.http() as http:
        pricing = http.get("/api/pricing").json()["data"]
        contract = http.get("/api/contracts/current", params={"name": "agent-registry"})
        unknown = http.get("/api/contracts/current", params={"name": "other"})
    assert pricing["prices"] == {"host-card": 10, "set-card": 5, "card-unpublish": 1, "deregister": 0}
    assert contract.json()["data"] == {"name": "agent-registry", "version": "1.7.0"}
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "not_found" and "'other'" in unknown.json()["detail"]


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


def test_jobs_of_other_accounts_are_not_visible(live_server, agent_client):
    job = agent_client.host_card(registration_card("mine"))
    other_key = claim_key_over_http(live_server)
    from app.client.library import ApiError, TesseraClient

    with TesseraClient(live_server.url, api_key=other_key) as other, pytest.raises(ApiError) as raised:
        other.get_job(job["id"])
    assert raised.value.status == 404


def test_claim_page_is_rate_limited_per_address(live_server, app):
    # A period of its own makes a fresh counter, even in a Redis shared with earlier runs.
    with config_changed(app, AGENT_CLAIM_RATE_LIMIT=f"3 per {3000 + uuid.uuid4().int % 600} seconds"):
        for _ in range(3):
            claim_key_over_http(live_server)
        with live_server.http() as http:
            page = http.get("/claim")
            token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
            limited = http.post("/claim", data={"csrf_token": token, "kind": "agent"})
    assert limited.status_code == 429
    assert "Retry-After" in limited.headers


def test_claim_needs_the_form_token(live_server):
    with live_server.http() as http:
        answer = http.post("/claim", data={"csrf_token": "forged", "kind": "agent"})
    assert answer.status_code == 400
    assert "agent-key" not in answer.text


def test_claim_page_is_testnet_only(live_server, app):
    with live_server.http() as http:
        form = http.get("/claim")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1)
        with config_changed(app, AGENT_NETWORK="production"):
            page = http.get("/claim")
            # A form fetched while the network was a testnet no longer issues a key.
            submitted = http.post("/claim", data={"csrf_token": token, "kind": "agent"})
    for answer in (page, submitted):
        assert answer.status_code == 404
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        assert answer.json()["code"] == "not_found"
        assert "testnet" in answer.json()["detail"]
    assert "agent-key" not in submitted.text


def test_resolve_network_did_for_other_features(app, agent_client):
    from app.dids.resolution import resolve_network_did

    with app.test_request_context():
        document = resolve_network_did(agent_client.did)
        assert document["id"] == agent_client.did
        assert resolve_network_did("did:tessera:" + "0" * 40) is None
        assert resolve_network_did("did:key:z6Mk") is None


def _account_id(did: str) -> int:
    from sqlalchemy import select

    from app.agents.models import AgentAccount
    from app.extensions import db

    return db.session.scalar(select(AgentAccount.id).where(AgentAccount.did == did))


def test_library_signs_in_again_when_its_session_is_gone(app, agent_client):
    from sqlalchemy import delete

    from app.agents.models import AgentSession
    from app.db import transaction
    from app.extensions import db

    old_token = agent_client._session_token
    with app.app_context(), transaction():
        removed = db.session.execute(
            delete(AgentSession).where(AgentSession.account_id == _account_id(agent_client.did))
        )
        assert removed.rowcount >= 1
    assert agent_client.whoami()["did"] == agent_client.did
    assert agent_client._session_token != old_token


def test_expired_challenges_and_sessions_are_purged(app, live_server, agent_client):
    from datetime import timedelta

    from sqlalchemy import func, select, update

    from app.agents.models import AgentSession, AuthChallenge
    from app.db import transaction, utcnow
    from app.extensions import db
    from worker.agents import purge_expired

    expiring, staying = (ethereum.address_from_private_key(ethereum.generate_private_key()) for _ in range(2))
    with live_server.http() as http:
        _challenge(http, expiring)
        _challenge(http, staying)
    past = utcnow() - timedelta(seconds=1)
    with app.app_context(), transaction():
        account_id = _account_id(agent_client.did)
        db.session.execute(update(AuthChallenge).where(AuthChallenge.address == expiring).values(expires_at=past))
        db.session.execute(update(AgentSession).where(AgentSession.account_id == account_id).values(expires_at=past))
    assert purge_expired() >= 2

    def count(model, *conditions) -> int:
        return db.session.scalar(select(func.count()).select_from(model).where(*conditions))

    with app.app_context():
        left = count(AuthChallenge, AuthChallenge.address == expiring) + count(
            AgentSession, AgentSession.account_id == account_id
        )
        kept = count(AuthChallenge, AuthChallenge.address == staying)
        db.session.rollback()
    assert left == 0
    assert kept == 1
    assert agent_client.whoami()["did"] == agent_client.did


def test_user_dids_resolve_in_the_network_method(client, master):
    created = client.post(
        "/v1/user/create",
        json={"profile": {"email_address": f"{uuid.uuid4().hex}@example.com"}},
        headers=master.headers,
    )
    assert created.status_code == 201, created.get_data(as_text=True)
    did = created.get_json()["data"]["did"]
    resolved = client.get(f"/api/did/{did}")
    assert resolved.status_code == 200
    assert resolved.get_json()["id"] == did


def test_consent_page_of_an_unknown_consent_is_a_404_problem(live_server):
    with live_server.http() as http:
        answer = http.get("/consent/" + "0" * 32)
    assert answer.status_code == 404
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert answer.json()["code"] == "not_found"
