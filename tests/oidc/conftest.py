"""Fixtures of the OpenID tests: a live server on loopback, a relying party's callback server,
tenants with a user."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from app import create_app
from app.extensions import celery
from tests.support.config import set_settings, setting_of
from tests.support.oidc import make_tenant
from tests.support.servers import serve_on_loopback


@dataclass
class LiveServer:
    url: str
    app: object


@pytest.fixture(scope="session")
def live_server(app, real_worker):
    """The application served over real HTTP on 127.0.0.1 and named as the README names it,
    `http://localhost:<port>` (its BASE_URL and issuer)."""
    holder: dict = {}
    server = make_server("127.0.0.1", 0, lambda environ, start: holder["app"](environ, start), threaded=True)
    url = f"http://localhost:{server.server_port}"
    holder["app"] = create_app(
        {
            "TESTING": True,
            "OIDC_ISSUER": url,
            "BASE_URL": url,
            "OIDC_LOGIN_RATE_LIMIT": "100000 per minute",
            "OIDC_TOKEN_RATE_LIMIT": "100000 per minute",
            "OIDC_KEY_CACHE_SECONDS": 0,
            # One limiter serves both applications: its keys carry the prefix it was first given.
            "RATELIMIT_KEY_PREFIX": app.config["RATELIMIT_KEY_PREFIX"],
        }
    )
    celery.flask_app = app  # create_app rebinds the shared Celery app; the session app stays its owner
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    yield LiveServer(url, holder["app"])
    server.shutdown()
    thread.join(timeout=5)


@dataclass
class CallbackServer:
    """A relying party's redirect target on loopback that records every request it receives."""

    url: str
    hits: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def callback_server():
    hits: list[str] = []

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        hits.append(path)
        return "text/html", b"<!doctype html><title>Relying party</title><p id='rp'>callback received</p>"

    server = serve_on_loopback(answer, name="rp-callback")
    yield CallbackServer(f"http://127.0.0.1:{server.server_port}", hits)
    server.shutdown()


@pytest.fixture(autouse=True)
def generous_login_rate_limit(app):
    """Every test signs in from 127.0.0.1; the limit itself is tested on its own."""
    previous = setting_of(app, "OIDC_LOGIN_RATE_LIMIT")
    set_settings(app, OIDC_LOGIN_RATE_LIMIT="100000 per minute")
    yield
    set_settings(app, OIDC_LOGIN_RATE_LIMIT=previous)


@pytest.fixture
def tenant(app, client):
    return make_tenant(app, client)


RP_DIR = Path(__file__).parent / "rp_node"


@pytest.fixture(scope="session")
def node_rp():
    """openid-client (OpenID Certified relying-party library) step by step: `node_rp(step, data)`
    runs tests/oidc/rp_node/rp.mjs and returns its JSON. `npm ci` installs the pinned packages
    there on first use. Skipped only when node or npm is not installed."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run openid-client")
    if not (RP_DIR / "node_modules" / "openid-client" / "package.json").exists():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=RP_DIR, check=True, timeout=300, capture_output=True
        )

    def run(step: str, data: dict) -> dict:
        completed = subprocess.run(
            ["node", "rp.mjs", step, json.dumps(data)], cwd=RP_DIR, capture_output=True, text=True, timeout=120
        )
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout)

    return run
