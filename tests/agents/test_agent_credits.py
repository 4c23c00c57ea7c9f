"""Credits (app.agents.credits): prices, the ledger, the testnet claim page, housekeeping."""

from __future__ import annotations

import re
import uuid

from sqlalchemy import select

from app.agents import ethereum
from tests.support.agents import (
    account_id,
    challenge_message,
    claim_key_over_http,
    registration_card,
)
from tests.support.config import config_changed


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


def test_expired_challenges_and_sessions_are_purged(app, live_server, agent_client):
    from datetime import timedelta

    from sqlalchemy import func, update

    from app.agents.models import AgentSession, AuthChallenge
    from app.agents.tasks import purge_expired
    from app.db import transaction, utcnow
    from app.extensions import db

    expiring, staying = (ethereum.address_from_private_key(ethereum.generate_private_key()) for _ in range(2))
    with live_server.http() as http:
        challenge_message(http, expiring)
        challenge_message(http, staying)
    past = utcnow() - timedelta(seconds=1)
    with app.app_context(), transaction():
        agent_id = account_id(agent_client.did)
        db.session.execute(update(AuthChallenge).where(AuthChallenge.address == expiring).values(expires_at=past))
        db.session.execute(update(AgentSession).where(AgentSession.account_id == agent_id).values(expires_at=past))
    assert purge_expired() >= 2

    def count(model, *conditions) -> int:
        return db.session.scalar(select(func.count()).select_from(model).where(*conditions))

    with app.app_context():
        left = count(AuthChallenge, AuthChallenge.address == expiring) + count(
            AgentSession, AgentSession.account_id == agent_id
        )
        kept = count(AuthChallenge, AuthChallenge.address == staying)
        db.session.rollback()
    assert left == 0
    assert kept == 1
    assert agent_client.whoami()["did"] == agent_client.did


def test_a_claim_form_without_its_token_is_an_html_400_and_issues_nothing(live_server):
    with live_server.http() as http:
        answer = http.post("/claim", data={"kind": "agent"})
    assert answer.status_code == 400
    assert answer.headers["Content-Type"].startswith("text/html")
    assert 'id="agent-key"' not in answer.text
    assert claim_key_over_http(live_server).startswith("0x")


def test_pricing_and_ledger_views_name_every_field(live_server, agent_client):
    with live_server.http() as http:
        pricing = http.get("/api/pricing").json()["data"]
    assert pricing == {
        "unit": "credits",
        "prices": {"host-card": 10, "set-card": 5, "card-unpublish": 1, "deregister": 0},
    }
    job = agent_client.host_card(registration_card())
    ledger = agent_client.credits()
    assert sorted(ledger) == ["balance", "did", "entries"]
    assert (ledger["did"], ledger["balance"]) == (agent_client.did, 990)
    charge, grant = ledger["entries"]
    assert charge == {
        "amount": -10,
        "reason": "host-card",
        "subject_did": agent_client.did,
        "job_id": job["id"],
        "balance_after": 990,
        "created_at": charge["created_at"],
    }
    assert grant == {
        "amount": 1000,
        "reason": "testnet-claim",
        "subject_did": None,
        "job_id": None,
        "balance_after": 1000,
        "created_at": grant["created_at"],
    }
