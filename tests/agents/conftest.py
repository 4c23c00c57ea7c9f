"""Fixtures of the agent network tests: a live HTTP server and keys claimed from it."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner
from werkzeug.serving import make_server

from app.client.library import TesseraClient
from app.settings import install_settings
from tests.support.agents import LiveServer, claim_key_over_http


@pytest.fixture(scope="session")
def live_server(app, real_worker):
    """The session's application served over real HTTP on a loopback port, in a thread.

    Jobs run as the session runs them: eagerly after commit on SQLite, in the real worker
    process on PostgreSQL + Redis.
    """
    server = make_server("127.0.0.1", 0, app, threaded=True)
    url = f"http://localhost:{server.server_port}"  # as the README names the service
    app.config.update(
        AGENT_NETWORK_URL=url,
        AGENT_CLAIM_RATE_LIMIT="10000 per hour",
        AGENT_CHALLENGE_RATE_LIMIT="10000 per minute",
    )
    install_settings(app)
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    yield LiveServer(url)
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture
def claimed_key(live_server) -> str:
    return claim_key_over_http(live_server)


@pytest.fixture
def session(live_server, agent_client) -> dict:
    """The bearer header and DID of a signed-in agent with test credits."""
    return {"Authorization": f"Bearer {agent_client._session_token}", "did": agent_client.did}


@pytest.fixture
def agent_client(live_server, claimed_key):
    with TesseraClient(live_server.url, api_key=claimed_key, poll_interval=0.05, job_timeout=30) as client:
        client.authenticate()
        yield client


class Outbox:
    """Holds new jobs in the outbox, as while the broker is unreachable, until ``release``."""

    def __init__(self, app, monkeypatch) -> None:
        from app.jobs import service as jobs

        self.app, self.jobs, self.monkeypatch = app, jobs, monkeypatch

    def hold(self) -> None:
        self.monkeypatch.setattr(self.jobs, "_broker_down_until", time.monotonic() + 3600)

    def resume(self) -> None:
        """Let the broker back: new jobs are published again; those that waited still wait."""
        self.jobs._broker_down_until = 0.0

    def release(self) -> None:
        """Let the broker back and run the operator's outbox sweep, which publishes what waited."""
        self.resume()
        self.monkeypatch.setitem(self.app.config, "OUTBOX_GRACE_SECONDS", 0)
        result = self.app.test_cli_runner().invoke(args=["outbox", "sweep"])
        assert result.exit_code == 0, result.output


@pytest.fixture
def outbox(app, monkeypatch) -> Outbox:
    return Outbox(app, monkeypatch)


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    """A runner for the `tessera` CLI with none of its settings taken from this environment."""
    for name in (
        "TESSERA_ENV",
        "TESSERA_API_KEY",
        "TESSERA_NETWORK_URL",
        "TESSERA_PRODUCTION_URL",
        "TESSERA_JOB_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()
