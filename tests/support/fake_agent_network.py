"""A tiny stand-in for the Tessera network over real HTTP on loopback, scripted by each test.

It answers sign-in, consents and jobs the way a network would, but says what the test tells it
to (a tampered consent or sign-in challenge, a job that stays queued for a while) and records
what clients sent.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from app.agents.siwe import SiweMessage

JOB_ID = "5b0d3c8e-3f6a-4a51-9d59-2f1e8c7a9b10"


def sign_in_message(url: str, address: str, **changes: Any) -> str:
    """A genuine EIP-4361 challenge of the network at ``url`` for ``address``; ``changes`` alter fields."""
    now = datetime.now(UTC).replace(microsecond=0)
    fields: dict[str, Any] = {
        "domain": urlparse(url).netloc,
        "address": address,
        "statement": "Sign in to the Tessera agent network.",
        "uri": f"{url}/api/auth/verify",
        "chain_id": 1,
        "nonce": secrets.token_hex(16),
        "issued_at": now,
        "expiration_time": now + timedelta(minutes=5),
    }
    return SiweMessage(**{**fields, **changes}).to_text()


@dataclass
class FakeNetwork:
    """Scripted answers (``consent``, ``challenge``, ``job_states``, ``job_result``) and what was received.

    ``challenge(network, address)`` returns the sign-in message to serve; by default a genuine
    one for this network; ``announced_chain_id``, when set, is the chain id announced beside it.
    ``sign_ins`` records what clients sent to ``/api/auth/verify``.
    ``failure`` (status, content type, body), when set, is the answer to every request (a broken
    network or a proxy in front of it).
    """

    agent_did: str
    challenge: Callable[[FakeNetwork, str], str] | None = None
    announced_chain_id: int | None = None
    sign_ins: list[dict[str, Any]] = field(default_factory=list)
    unauthorized_paths: set[str] = field(default_factory=set)
    consent: dict[str, Any] | None = None
    job_states: list[str] = field(default_factory=lambda: ["succeeded"])
    job_result: dict[str, Any] = field(default_factory=dict)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    hosted: list[bytes] = field(default_factory=list)
    polls: int = 0
    failure: tuple[int, str, bytes] | None = None
    url: str = ""

    def job(self) -> dict[str, Any]:
        """The job as the next poll sees it: the scripted states in turn, the last one repeated."""
        state = self.job_states[min(self.polls, len(self.job_states) - 1)]
        self.polls += 1
        final = state in ("succeeded", "failed")
        return {"id": JOB_ID, "state": state, "result": self.job_result if final else None, "error": None}


def _handler(network: FakeNetwork) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _failed(self) -> bool:
            if network.failure is None:
                return False
            status, content_type, payload = network.failure
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return True

        def do_POST(self) -> None:
            body = self._body()
            if self._failed():
                return
            if self.path == "/api/auth/challenge":
                address = json.loads(body)["address"]
                make = network.challenge or (lambda net, addr: sign_in_message(net.url, addr))
                message = make(network, address)
                answer = {"message": message, "nonce": None, "expires_at": "2999-01-01T00:00:00Z"}
                if network.announced_chain_id is not None:
                    answer["chain_id"] = network.announced_chain_id
                self._send(200, {"data": answer})
            elif self.path == "/api/auth/verify":
                network.sign_ins.append(json.loads(body))
                session = {"token": "fake-session", "token_type": "Bearer", "did": network.agent_did, "kind": "agent"}
                self._send(200, {"data": session})
            elif re.fullmatch(r"/api/consents/[^/]+/approve", self.path):
                network.approvals.append(json.loads(body))
                self._send(202, {"data": {"id": JOB_ID, "state": "queued"}})
            else:
                self._send(404, {"status": 404, "code": "not_found", "title": "Not Found"})

        def do_PUT(self) -> None:
            body = self._body()
            if self._failed():
                return
            if re.fullmatch(r"/api/agents/[^/]+/card", self.path):
                network.hosted.append(body)
                self._send(202, {"data": {"id": JOB_ID, "state": "queued"}})
            else:
                self._send(404, {"status": 404, "code": "not_found", "title": "Not Found"})

        def do_GET(self) -> None:
            if self._failed():
                return
            if self.path in network.unauthorized_paths:
                self._send(401, {"status": 401, "code": "authentication_failed", "title": "Authentication failed"})
            elif self.path.startswith("/api/consents/") and network.consent is not None:
                self._send(200, {"data": network.consent})
            elif self.path == f"/api/jobs/{JOB_ID}":
                self._send(200, {"data": network.job()})
            else:
                self._send(404, {"status": 404, "code": "not_found", "title": "Not Found"})

    return Handler


@contextmanager
def serve(network: FakeNetwork) -> Iterator[FakeNetwork]:
    """Serve ``network`` on a loopback port (its ``url``) for the duration of a ``with`` block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(network))
    thread = threading.Thread(target=server.serve_forever, name="fake-network", daemon=True)
    network.url = f"http://127.0.0.1:{server.server_port}"
    thread.start()
    try:
        yield network
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
