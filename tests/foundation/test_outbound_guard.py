"""The outbound client refuses to call another host while a database transaction is open, and ends
every call at its total deadline, the answer's headers included (design: one owner of calls to other hosts)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from app import outbound
from app.db import transaction
from app.extensions import db
from app.jobs.models import Job
from app.oidc import outbound as oidc_outbound
from tests.support.config import config_changed
from tests.support.servers import DripServer, serve_on_loopback


@pytest.fixture
def peer():
    hits: list[str] = []

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        hits.append(path)
        return "application/json", b'{"keys": []}'

    server = serve_on_loopback(answer)
    yield f"127.0.0.1:{server.server_port}", hits
    server.shutdown()


def test_a_call_inside_an_open_transaction_is_refused_before_anything_is_sent(app, peer):
    host, hits = peer
    with app.app_context(), config_changed(app, OIDC_OUTBOUND_ALLOW_HOSTS=host):
        with pytest.raises(outbound.CalledInsideTransaction), transaction():
            db.session.execute(select(Job.id).limit(1))
            oidc_outbound.request("GET", f"http://{host}/jwks.json")
        assert hits == []
        assert not db.session().in_transaction()
        assert oidc_outbound.request("GET", f"http://{host}/jwks.json").status_code == 200
    assert hits == ["/jwks.json"]


def test_a_peer_dripping_its_headers_is_cut_at_the_total_deadline():
    server = DripServer(interval=0.2, duration=10.0)
    host, port = server.host.split(":")
    policy = outbound.OutboundPolicy(
        allowed_private_hosts=frozenset({server.host}), read_timeout=5.0, total_timeout=1.0
    )
    started = time.monotonic()
    try:
        with pytest.raises(outbound.TooSlow):
            outbound.fetch(policy, "GET", "http", host, int(port), "/", headers={})
        assert time.monotonic() - started < 2.0
        assert server.wait_until_idle(2.0)
    finally:
        server.stop()


def test_a_platform_dripping_its_answer_is_cut_at_the_social_http_timeout():
    """Social connectors keep their own clients: each request still ends at its total deadline."""
    from app.social.connectors import PlatformUnavailable
    from app.social.connectors.http import PlatformHttp

    server = DripServer(interval=0.2, duration=10.0)
    http = PlatformHttp("platform_b", read_retry_after=lambda _response, _body: None, timeout=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(PlatformUnavailable):
            http.get_json(server.url("/api/users/@me"))
        assert time.monotonic() - started < 2.0
    finally:
        http.close()
        server.stop()


def test_a_resolver_that_never_answers_is_cut_at_the_total_deadline():
    def silent_resolver(_host: str, _port: int) -> list[str]:
        time.sleep(5)
        return ["192.0.2.1"]

    policy = outbound.OutboundPolicy(total_timeout=0.5, resolve_addresses=silent_resolver)
    started = time.monotonic()
    with pytest.raises(outbound.TooSlow):
        outbound.fetch(policy, "GET", "https", "slow-dns.example", 443, "/", headers={})
    assert time.monotonic() - started < 1.5


def test_a_platform_client_s_name_lookup_is_inside_its_deadline(monkeypatch):
    """Clients of fixed platforms (social connectors) use the deadline transport: its lookup is bounded too."""
    import httpx

    def silent_resolver(_host: str, _port: int) -> list[str]:
        time.sleep(5)
        return ["192.0.2.1"]

    monkeypatch.setattr(outbound, "system_addresses", silent_resolver)
    transport = outbound.DeadlineTransport.per_request(0.5, verify=True)
    started = time.monotonic()
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectTimeout):
        client.get("http://slow-dns.example/")
    assert time.monotonic() - started < 1.5
