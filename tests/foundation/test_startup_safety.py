"""Safe production defaults: what start-up refuses, warns about, and defaults to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json
from app import create_app
from app.agents.settings import AgentSettings
from app.oidc.settings import OidcSettings
from app.settings import current
app = create_app()
answer = {name: app.config.get(name) for name in ("BASE_URL", "DEV_OUTBOX")}
answer["AGENT_NETWORK"] = current(AgentSettings, app).network
answer["OIDC_ISSUER"] = current(OidcSettings, app).issuer
answer["claim"] = app.test_client().get("/claim").status_code
answer["discovery"] = app.test_client().get("/.well-known/openid-configuration").get_json()
print(json.dumps(answer))
"""
UNREACHABLE_POSTGRES = "postgresql://tessera@127.0.0.1:9/none"


def _start(tmp_path: Path, args: list[str] | None = None, **settings: str | None) -> subprocess.CompletedProcess:
    """Start the application in a fresh process (the embedded default unless `settings` say otherwise)."""
    env = {key: value for key, value in os.environ.items() if key not in {
        "REDIS_URL", "CELERY_BROKER_URL", "BASE_URL", "PORT", "AGENT_NETWORK", "DEV_OUTBOX", "OIDC_ISSUER",
        "SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY",
    }}  # fmt: skip
    env.update(TESSERA_INSTANCE_DIR=str(tmp_path / "instance"), DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}")
    for key, value in settings.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    command = args or [sys.executable, "-c", PROBE]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _answer(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.embedded
@pytest.mark.parametrize("base_url", ["https://id.example.org", "http://id.example.org", "http://10.0.0.5:5000"])
def test_dev_outbox_is_refused_unless_base_url_is_loopback_http(tmp_path, base_url):
    for args in (None, [sys.executable, "-m", "flask", "--app", "app", "clients", "list"]):
        result = _start(tmp_path, args, DEV_OUTBOX="1", BASE_URL=base_url)
        assert result.returncode == 3
        assert "Tessera refuses to start: DEV_OUTBOX=1" in result.stderr
        assert f"BASE_URL is {base_url}" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.embedded
@pytest.mark.parametrize("base_url", ["http://localhost:8000", "http://LOCALHOST:5000/tessera"])
def test_dev_outbox_on_loopback_starts_with_a_warning(tmp_path, base_url):
    result = _start(tmp_path, DEV_OUTBOX="1", BASE_URL=base_url)
    assert _answer(result)["DEV_OUTBOX"] is True
    assert "DEV_OUTBOX=1: login codes are readable by anyone at /dev/outbox" in result.stderr


@pytest.mark.embedded
@pytest.mark.parametrize(
    ("base_url", "instead"),
    [
        ("http://127.0.0.1:5000", "http://localhost:5000"),
        ("http://[::1]:8000/tessera", "http://localhost:8000/tessera"),
        ("http://127.0.0.2", "http://localhost"),
    ],
)
def test_a_loopback_ip_base_url_is_refused_with_one_line_naming_localhost(tmp_path, base_url, instead):
    """Browsers refuse passkeys on an IP address: the service would start with passkeys that fail."""
    for args in (None, [sys.executable, "-m", "flask", "--app", "app", "clients", "list"]):
        result = _start(tmp_path, args, DEV_OUTBOX="1", BASE_URL=base_url)
        assert result.returncode == 3, result.stderr
        lines = result.stderr.strip().splitlines()
        assert lines == [
            f"Tessera refuses to start: BASE_URL {base_url} is a loopback IP address, where browsers refuse passkeys "
            f"(their relying party must be a domain name): use {instead}."
        ]


@pytest.mark.embedded
def test_dev_outbox_off_starts_quietly(tmp_path):
    result = _start(tmp_path, BASE_URL="https://id.example.org")
    assert _answer(result)["DEV_OUTBOX"] is False
    assert "DEV_OUTBOX" not in result.stderr


@pytest.mark.embedded
def test_base_url_defaults_to_the_port_the_service_listens_on(tmp_path):
    answer = _answer(_start(tmp_path, PORT="5123"))
    assert answer["BASE_URL"] == "http://localhost:5123"
    assert answer["OIDC_ISSUER"] == "http://localhost:5123"
    # What a relying party reads over HTTP names the same port (the test client asks for "localhost").
    discovery = answer["discovery"]
    assert discovery["issuer"] == "http://localhost:5123"
    endpoints = [value for key, value in discovery.items() if key.endswith(("_endpoint", "_uri"))]
    assert len(endpoints) >= 4 and all(url.startswith("http://localhost:5123/") for url in endpoints), endpoints
    assert _answer(_start(tmp_path))["BASE_URL"] == "http://localhost:5000"
    assert _answer(_start(tmp_path, PORT="5123", BASE_URL="https://id.example.org/"))["BASE_URL"] == (
        "https://id.example.org"
    )


@pytest.mark.embedded
def test_postgresql_without_shared_secrets_refuses_to_start(tmp_path):
    result = _start(tmp_path, DATABASE_URL=UNREACHABLE_POSTGRES, SECRET_KEY="only-this-one")
    assert result.returncode == 3
    assert "Tessera refuses to start: ENCRYPTION_KEYS, SECRET_HASH_KEY must be set" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "instance" / ".encryption_key").exists()


@pytest.mark.embedded
def test_testnet_claim_page_only_where_the_network_says_testnet(tmp_path):
    secrets = {"SECRET_KEY": "k", "ENCRYPTION_KEYS": "e", "SECRET_HASH_KEY": "h"}
    production = _answer(_start(tmp_path, DATABASE_URL=UNREACHABLE_POSTGRES, **secrets))
    assert production["AGENT_NETWORK"] == "production" and production["claim"] == 404
    embedded = _answer(_start(tmp_path, args=None))
    assert embedded["AGENT_NETWORK"] == "testnet"
    explicit = _answer(_start(tmp_path, DATABASE_URL=UNREACHABLE_POSTGRES, AGENT_NETWORK="testnet", **secrets))
    assert explicit["AGENT_NETWORK"] == "testnet"


def test_dev_outbox_needs_a_recipient(client):
    response = client.get("/dev/outbox")
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json" and "to=" in response.get_json()["detail"]
    assert client.get("/dev/outbox", query_string={"to": "nobody@example.org"}).status_code == 200


@pytest.mark.embedded
@pytest.mark.parametrize(
    ("name", "value"), [("SMTP_PORT", "twenty-five"), ("DB_POOL_SIZE", "5.5"), ("RATELIMIT_ENABLED", "perhaps")]
)
def test_a_malformed_setting_refuses_start_up_naming_it(tmp_path, name, value):
    for args in (None, [sys.executable, "-m", "flask", "--app", "app", "clients", "list"]):
        result = _start(tmp_path, args, **{name: value})
        assert result.returncode == 3
        assert f"Tessera refuses to start: malformed setting {name}: " in result.stderr
        assert value in result.stderr and "Traceback" not in result.stderr


@pytest.mark.embedded
def test_a_contexts_directory_that_cannot_be_read_refuses_start_up(tmp_path):
    missing = tmp_path / "no-such-contexts"
    broken = tmp_path / "broken-contexts"
    broken.mkdir()
    (broken / "urlmap.json").write_text(json.dumps({"https://contexts.example/v1": "absent.jsonld"}))
    for directory in (missing, broken):
        for args in (None, [sys.executable, "-m", "flask", "--app", "app", "clients", "list"]):
            result = _start(tmp_path, args, JSONLD_CONTEXTS_DIR=str(directory))
            assert result.returncode == 3, result.stderr
            assert (
                f"Tessera refuses to start: malformed setting JSONLD_CONTEXTS_DIR: {directory} is not a readable "
                "JSON-LD contexts directory" in result.stderr
            )
            assert "Traceback" not in result.stderr
    readable = tmp_path / "contexts"
    readable.mkdir()
    (readable / "extra.jsonld").write_text(json.dumps({"@context": {"extra": "https://contexts.example/#extra"}}))
    (readable / "urlmap.json").write_text(json.dumps({"https://contexts.example/v1": "extra.jsonld"}))
    assert _answer(_start(tmp_path, JSONLD_CONTEXTS_DIR=str(readable)))["DEV_OUTBOX"] in (True, False)
