"""Helpers of the agent network tests: a live server's address, cards, keys claimed over HTTP."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import select

from app.agents.models import AgentAccount
from app.agents.registration_file import REGISTRATION_TYPE
from app.extensions import db

# A well-formed DID no test registers, and an address nothing listens on.
DID = "did:tessera:0123456789abcdef0123456789abcdef01234567"
UNREACHABLE = "http://127.0.0.1:9"


def registration_card(name: str = "Test agent", **members: Any) -> bytes:
    """A card in the ERC-8004 registration-file shape, as JSON bytes; ``members`` add or replace."""
    card = {
        "type": REGISTRATION_TYPE,
        "name": name,
        "description": f"{name}, hosted by a test",
        "services": [{"name": "A2A", "endpoint": "https://agent.example/.well-known/agent-card.json"}],
        **members,
    }
    return json.dumps(card).encode()


@dataclass
class LiveServer:
    url: str

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=20)


_KEY_RE = re.compile(r'<code id="agent-key">(0x[0-9a-f]{64})</code>')
_CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def claim_key_over_http(live_server: LiveServer, kind: str = "agent") -> str:
    """Claim a fresh key with test credits through the HTML claim form (as a browser would)."""
    with live_server.http() as http:
        page = http.get("/claim")
        assert page.status_code == 200, page.text
        token = _CSRF_RE.search(page.text).group(1)
        answer = http.post("/claim", data={"csrf_token": token, "kind": kind})
        assert answer.status_code == 200, answer.text
        return _KEY_RE.search(answer.text).group(1)


def challenge_message(http: httpx.Client, address: str) -> str:
    """Ask the network for a sign-in challenge for ``address``; its EIP-4361 message."""
    answer = http.post("/api/auth/challenge", json={"address": address})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["message"]


def account_id(did: str) -> int:
    """The row id of the account of ``did`` (inside an application context)."""
    return db.session.scalar(select(AgentAccount.id).where(AgentAccount.did == did))


def http_problem(answer: httpx.Response, status: int) -> dict:
    """The body of a problem+json answer with ``status``."""
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"] == "application/problem+json"
    return answer.json()
