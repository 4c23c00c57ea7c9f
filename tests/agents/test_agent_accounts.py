"""Accounts and sign-in (app.agents.accounts): challenges, sessions, the account view."""

from __future__ import annotations

import re

import pytest

from app.agents import ethereum
from app.client.library import ApiError, TesseraClient
from tests.support.agents import (
    account_id,
    challenge_message,
    claim_key_over_http,
    registration_card,
)


def test_challenge_is_an_eip4361_message_for_this_network(live_server):
    key = ethereum.generate_private_key()
    address = ethereum.address_from_private_key(key)
    with live_server.http() as http:
        message = challenge_message(http, address.lower())
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
        message = challenge_message(http, ethereum.address_from_private_key(key))
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
        message = challenge_message(http, ethereum.address_from_private_key(key))
        body = {"message": message, "signature": ethereum.sign_personal_message(message, key)}
        assert http.post("/api/auth/verify", json=body).status_code == 200
        replay = http.post("/api/auth/verify", json=body)
    assert replay.status_code == 401
    assert replay.json()["code"] == "authentication_failed"


def test_high_s_signature_is_refused(live_server):
    key = ethereum.generate_private_key()
    with live_server.http() as http:
        message = challenge_message(http, ethereum.address_from_private_key(key))
        raw = bytes.fromhex(ethereum.sign_personal_message(message, key)[2:])
        s = int.from_bytes(raw[32:64], "big")
        twin = raw[:32] + (ethereum.SECP256K1_ORDER - s).to_bytes(32, "big") + bytes([55 - raw[64]])
        answer = http.post("/api/auth/verify", json={"message": message, "signature": "0x" + twin.hex()})
    assert answer.status_code == 401
    assert "high-s" in answer.json()["detail"]


def test_altered_message_is_refused(live_server):
    key = ethereum.generate_private_key()
    with live_server.http() as http:
        message = challenge_message(http, ethereum.address_from_private_key(key))
        altered = message.replace("Sign in to the Tessera agent network.", "Sign in somewhere else.")
        answer = http.post(
            "/api/auth/verify", json={"message": altered, "signature": ethereum.sign_personal_message(altered, key)}
        )
    assert answer.status_code == 401


def test_same_key_keeps_its_did(live_server):

    key = ethereum.generate_private_key()
    with TesseraClient(live_server.url, api_key=key) as first, TesseraClient(live_server.url, api_key=key) as second:
        assert first.authenticate()["did"] == second.authenticate()["did"]


def test_library_signs_in_again_when_its_session_is_gone(app, agent_client):
    from sqlalchemy import delete

    from app.agents.models import AgentSession
    from app.db import transaction
    from app.extensions import db

    old_token = agent_client._session_token
    with app.app_context(), transaction():
        removed = db.session.execute(
            delete(AgentSession).where(AgentSession.account_id == account_id(agent_client.did))
        )
        assert removed.rowcount >= 1
    assert agent_client.whoami()["did"] == agent_client.did
    assert agent_client._session_token != old_token


def test_jobs_of_other_accounts_are_not_visible(live_server, agent_client):
    job = agent_client.host_card(registration_card("mine"))
    other_key = claim_key_over_http(live_server)

    with TesseraClient(live_server.url, api_key=other_key) as other, pytest.raises(ApiError) as raised:
        other.get_job(job["id"])
    assert raised.value.status == 404


def test_challenge_session_and_account_views_name_every_field(live_server):
    key = ethereum.generate_private_key()
    address = ethereum.address_from_private_key(key)
    with live_server.http() as http:
        challenge = http.post("/api/auth/challenge", json={"address": address}).json()["data"]
        assert sorted(challenge) == ["chain_id", "expires_at", "message", "nonce"]
        assert challenge["chain_id"] == 1 and "\nChain ID: 1\n" in challenge["message"]  # AGENT_CHAIN_ID's default
        assert challenge["expires_at"].endswith("Z")
        signature = ethereum.sign_personal_message(challenge["message"], ethereum.parse_private_key(key))
        verified = http.post("/api/auth/verify", json={"message": challenge["message"], "signature": signature})
        session = verified.json()["data"]
        assert verified.headers["Cache-Control"] == "no-store"
        assert sorted(session) == ["address", "did", "expires_at", "kind", "token", "token_type"]
        assert (session["token_type"], session["address"], session["kind"]) == ("Bearer", address, "agent")
        account = http.get("/api/account", headers={"Authorization": f"Bearer {session['token']}"}).json()["data"]
    assert account == {
        "did": session["did"],
        "address": address,
        "kind": "agent",
        "balance": 0,
        "created_at": account["created_at"],
        "deactivated": False,
    }
    assert account["created_at"].endswith("Z")


def test_sign_in_verifies_are_rate_limited_per_address(app, client):
    """Each verify recovers a signature: a flood from one address is refused like the challenge's."""
    from tests.support.config import config_changed

    body = {"message": "not a challenge", "signature": "0x" + "11" * 65}
    with config_changed(app, AGENT_CHALLENGE_RATE_LIMIT="3 per minute"):
        answers = [
            client.post("/api/auth/verify", json=body, environ_base={"REMOTE_ADDR": "10.9.8.5"}) for _ in range(5)
        ]
        other = client.post("/api/auth/verify", json=body, environ_base={"REMOTE_ADDR": "10.9.8.4"})
    statuses = [answer.status_code for answer in answers]
    assert all(status in (401, 422) for status in statuses[:3]), statuses
    assert statuses[3:] == [429, 429]
    assert answers[3].mimetype == "application/problem+json" and int(answers[3].headers["Retry-After"]) > 0
    assert other.status_code in (401, 422)
