"""The spec's registration steps end to end through the `tessera` CLI against a live server."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from app.client.cli import main
from tests.support.agents import claim_key_over_http, registration_card
from tests.support.config import config_changed


@pytest.fixture
def tessera(live_server, monkeypatch):
    """Run `tessera --json ...` in process against the live server; returns (exit code, JSON, output)."""
    for name in ("TESSERA_ENV", "TESSERA_API_KEY", "TESSERA_PRODUCTION_URL"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def run(*args: str, key: str | None = None, as_json: bool = True):
        env = {"TESSERA_NETWORK_URL": live_server.url}
        if key:
            env["TESSERA_API_KEY"] = key
        result = runner.invoke(main, (["--json"] if as_json else []) + list(args), env=env)
        document = None
        if as_json and result.stdout.strip():
            document = json.loads(result.stdout)
        return result.exit_code, document, result.output

    return run


def _finish_card(path, did: str) -> bytes:
    """Edit the scaffold as an author would: real endpoints in place of the placeholders."""
    card = json.loads(path.read_text())
    for service in card["services"]:
        if service["name"] == "A2A":
            service["endpoint"] = "https://echo.example/.well-known/agent-card.json"
        if service["name"] == "MCP":
            service["endpoint"] = "https://echo.example/mcp"
    card["image"] = "https://echo.example/echo.png"
    body = (json.dumps(card, indent=2, ensure_ascii=False) + "\n").encode()
    path.write_bytes(body)
    assert card["services"][-1] == {"name": "DID", "endpoint": did, "version": "v1"}
    return body


def test_registration_steps_end_to_end(tessera, live_server, claimed_key, tmp_path):
    # 1. the key comes from the claim page (fixture); 2. read the DID back.
    code, account, output = tessera("whoami", key=claimed_key)
    assert code == 0, output
    did = account["did"]
    assert account["balance"] == 1000
    code, again, _ = tessera("whoami", key=claimed_key)
    assert again["did"] == did, "the DID is bound once and read back, not recomputed"

    # 3. scaffold; hosting is refused while placeholders remain.
    card_path = tmp_path / "agent-card.json"
    code, scaffold, output = tessera(
        "agent", "create-card", "--out", str(card_path), "--name", "Echo", "--description", "Echoes", "--did", did
    )
    assert code == 0, output
    assert scaffold["placeholders"]
    code, refused, _ = tessera("host-card", "--file", str(card_path), key=claimed_key)
    assert code == 1 and refused["error"]["kind"] == "CardHasPlaceholders"
    body = _finish_card(card_path, did)

    # 4. host: private copy + public copy + charge.
    code, job, output = tessera("host-card", "--file", str(card_path), key=claimed_key)
    assert code == 0, output
    assert job["state"] == "succeeded"
    assert job["result"]["charged"] == 10 and job["result"]["balance"] == 990

    # 5. verify over plain HTTP: exact bytes, headers, DID document.
    with live_server.http() as http:
        public = http.get(f"/api/agent-card/{did}")
        assert public.status_code == 200
        assert public.content == body
        assert public.headers["content-type"] == "application/json"
        assert public.headers["etag"] and "max-age" in public.headers["cache-control"]
        assert http.get(f"/api/agent-card/{did}", headers={"If-None-Match": public.headers["etag"]}).status_code == 304
        document = http.get(f"/api/did/{did}")
        assert document.status_code == 200
        assert document.headers["content-type"].startswith("application/did+json")
        doc = document.json()
        assert doc["id"] == did
        assert doc["@context"][0] == "https://www.w3.org/ns/did/v1"
        method = doc["verificationMethod"][0]
        assert method["id"] == f"{did}#owner"
        assert method["type"] == "EcdsaSecp256k1RecoveryMethod2020"
        assert method["blockchainAccountId"].endswith(":" + account["address"])
        assert doc["authentication"] == [f"{did}#owner"] and doc["assertionMethod"] == [f"{did}#owner"]
        assert "service" not in doc

    code, ledger, _ = tessera("credits", key=claimed_key)
    assert ledger["balance"] == 990
    assert [entry["reason"] for entry in ledger["entries"]] == ["host-card", "testnet-claim"]

    # set-card: the URI appears as the AgentService.
    uri = "https://echo.example/.well-known/agent-card.json"
    code, job, output = tessera("set-card", "--uri", uri, key=claimed_key)
    assert code == 0, output
    with live_server.http() as http:
        doc = http.get(f"/api/did/{did}").json()
        assert doc["service"] == [{"id": f"{did}#agent", "type": "AgentService", "serviceEndpoint": uri}]
        full = http.get(f"/api/did/{did}", headers={"Accept": "application/did-resolution"})
        assert full.headers["content-type"].startswith("application/did-resolution")
        assert full.json()["didDocument"] == doc
        assert "created" in full.json()["didDocumentMetadata"]

    code, record, _ = tessera("agent", "registry", did, "--full", key=claimed_key)
    assert code == 0
    assert record["card_uri"] == uri and record["owner"] is None
    assert record["card"]["published"] is True
    assert record["contract"] == {"name": "agent-registry", "version": "1.7.0"}

    # card-unpublish: public 404, private copy kept and shown as unpublished.
    code, job, output = tessera("card-unpublish", "--yes", key=claimed_key)
    assert code == 0, output
    with live_server.http() as http:
        gone = http.get(f"/api/agent-card/{did}")
        assert gone.status_code == 404
        assert gone.headers["content-type"] == "application/problem+json"
        assert gone.json()["code"] == "not_found"
    from app.client.library import TesseraClient

    with TesseraClient(live_server.url, api_key=claimed_key) as client:
        private = client.get_card()
        assert private["published"] is False
        assert private["card"] == json.loads(body)

    # re-host after editing: the new bytes are public again.
    edited = body.replace(b'"Echoes"', b'"Echoes, louder"')
    card_path.write_bytes(edited)
    code, job, output = tessera("host-card", "--file", str(card_path), key=claimed_key)
    assert code == 0, output
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{did}").content == edited

    # deregister: record and both cards gone, DID deactivated (410).
    code, job, output = tessera("agent", "deregister", "--yes", key=claimed_key)
    assert code == 0, output
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{did}").status_code == 404
        resolved = http.get(f"/api/did/{did}")
        assert resolved.status_code == 410
        assert resolved.json()["didDocumentMetadata"]["deactivated"] is True
    # The deregistered key can no longer sign in; for others the record is gone (410).
    code, error, _ = tessera("agent", "registry", did, key=claimed_key)
    assert code == 3 and "deregistered" in error["error"]["message"]
    code, error, _ = tessera("agent", "registry", did, key=claim_key_over_http(live_server))
    assert code == 1 and error["error"]["status"] == 410


def test_zero_credit_key_is_refused_with_402_and_nothing_written(tessera, live_server, tmp_path):
    from app.agents.ethereum import generate_private_key

    key = generate_private_key()
    code, account, _ = tessera("whoami", key=key)
    assert code == 0 and account["balance"] == 0
    card = tmp_path / "card.json"
    card.write_bytes(registration_card("Paid nothing"))
    code, error, output = tessera("host-card", "--file", str(card), key=key)
    assert code == 1
    assert error["error"]["status"] == 402
    assert error["error"]["required"] == 10 and error["error"]["available"] == 0
    code, _, human = tessera("host-card", "--file", str(card), key=key, as_json=False)
    assert "costs 10 credits, 0 available" in human
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{account['did']}").status_code == 404
    code, ledger, _ = tessera("credits", key=key)
    assert ledger == {"did": account["did"], "balance": 0, "entries": []}


def test_wrong_key_fails_authentication_with_exit_3(tessera, live_server):
    code, error, _ = tessera("whoami", key="0x" + "11" * 31 + "zz")
    assert code == 3


def test_registry_version_below_1_7_0_refuses_deregistration(tessera, app, claimed_key, live_server):
    with config_changed(app, AGENT_REGISTRY_VERSION="1.6.9"):
        code, error, output = tessera("agent", "deregister", "--yes", key=claimed_key)
        code_h, _, human = tessera("agent", "deregister", "--yes", key=claimed_key, as_json=False)
    assert code == 1 and error["error"]["kind"] == "RegistryTooOld" and error["error"]["version"] == "1.6.9"
    assert code_h == 1 and "1.6.9" in human and "1.7.0" in human
    with httpx.Client(base_url=live_server.url) as http:
        code, account, _ = tessera("whoami", key=claimed_key)
        assert http.get(f"/api/did/{account['did']}").status_code == 200


def test_organisation_flow_through_the_cli(tessera, live_server, claimed_key, tmp_path):
    from tests.support.agents import claim_key_over_http

    org_key = claim_key_over_http(live_server, kind="organisation")
    _, org, _ = tessera("whoami", key=org_key)
    _, agent, _ = tessera("whoami", key=claimed_key)
    assert org["kind"] == "organisation" and agent["kind"] == "agent"
    card = tmp_path / "card.json"
    card.write_bytes(registration_card("Fleet member 7"))

    code, error, _ = tessera(
        "host-card", "--file", str(card), "--owner", org["did"], "--agent", agent["did"], key=org_key
    )
    assert code == 1 and error["error"]["status"] == 403

    code, request, output = tessera("consent", "request", "--owner", org["did"], "--agent", agent["did"], key=org_key)
    assert code == 0, output
    code, _, human = tessera("consent", "approve", request["consent_url"], key=claimed_key, as_json=False)
    assert code == 2 and "--yes" in human, "without a terminal the owner must be accepted with --yes"
    code, _, human = tessera(
        "consent", "approve", request["consent_url"], "--yes", "--owner", org["did"], key=claimed_key, as_json=False
    )
    assert code == 0, human
    assert f"Owner:   {org['did']}" in human
    assert f"{org['did']} now owns {agent['did']}" in human

    code, job, output = tessera(
        "host-card", "--file", str(card), "--owner", org["did"], "--agent", agent["did"], key=org_key
    )
    assert code == 0, output
    with live_server.http() as http:
        assert http.get(f"/api/agent-card/{agent['did']}").content == card.read_bytes()
    _, org_after, _ = tessera("credits", key=org_key)
    _, agent_after, _ = tessera("credits", key=claimed_key)
    assert org_after["balance"] == 990 and agent_after["balance"] == 1000

    code, error, _ = tessera("agent", "deregister", "--yes", key=claimed_key)
    assert code == 1 and error["error"]["kind"] == "OwnerNamedDeregistration"
    assert error["error"]["owner"] == org["did"]
    code, _, human = tessera("agent", "deregister", "--yes", key=claimed_key, as_json=False)
    assert code == 1 and "names the owner" in human and org["did"] in human
    with live_server.http() as http:
        assert http.get(f"/api/did/{agent['did']}").status_code == 200
