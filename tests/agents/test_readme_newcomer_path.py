"""The README's newcomer path, run as written (its shell lines) against a live service: a signed-in
user, then a hosted agent card."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from app.agents.ethereum import address_from_private_key
from tests.support.docs import README, copy_checkout, quickstart_block, run_shell, virtual_environment


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of the checkout whose `.venv` is this run's: the second terminal's directory."""
    if virtual_environment() is None:
        pytest.skip("the README path activates .venv of the checkout, which the quick start creates")
    return copy_checkout(tmp_path / "checkout")


def _terminal(**settings: str) -> dict[str, str]:
    """The second terminal: this run's environment (its database), the virtual environment active."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **settings}


def test_readme_says_the_second_terminal_and_what_the_test_command_installs():
    text = README.read_text()
    assert "second terminal" in text
    test_command = quickstart_block("test")
    assert test_command.index('echo "Installing Debian packages chromium and chromium-driver') < test_command.index(
        "apt-get update"
    )
    assert "--api-key" not in quickstart_block("agent") and "tessera login" in quickstart_block("agent")


def test_readme_newcomer_lines_reach_a_signed_in_user(live_server, checkout):
    """The demo command's authorize URL through the hosted pages, then its printed exchange: the claims."""
    import requests

    from tests.support.oidc import query_of, sign_in_over_http

    lines = quickstart_block("newcomer")
    assert lines.splitlines() == [". .venv/bin/activate", "tessera-admin clients demo"]
    result = run_shell(lines + " --json", cwd=checkout, env=_terminal(BASE_URL=live_server.url))
    assert result.returncode == 0, (result.stdout, result.stderr)
    demo = json.loads(result.stdout)
    assert demo["authorize_url"].startswith(f"{live_server.url}/v1/openidc/authorize?")
    assert demo["outbox_url"] == f"{live_server.url}/dev/outbox?to=ada%40example.org"

    human = run_shell(lines, cwd=checkout, env=_terminal(BASE_URL=live_server.url))
    assert human.returncode == 0 and "Open this URL in a browser" in human.stdout, human.stderr

    with requests.Session() as browser:
        callback = sign_in_over_http(browser, live_server.url, demo["authorize_url"], "ada@example.org")
    assert callback.startswith("http://127.0.0.1:8400/callback?")
    code = query_of(callback)["code"]
    exchanged = run_shell(demo["exchange_command"], cwd=checkout, env=_terminal(CODE=code))
    assert exchanged.returncode == 0, (exchanged.stdout, exchanged.stderr)
    claims = json.loads(exchanged.stdout)
    assert claims["sub"] and claims["aud"] in (str(demo["client_id"]), [str(demo["client_id"])])
    assert claims["sub"] in (demo["user"]["did"], str(demo["user"]["user_id"])), claims

    # The code again (or one mistyped, or expired): the server's answer in one line, no traceback.
    for used_code in (code, code[:-2]):
        refused = run_shell(demo["exchange_command"], cwd=checkout, env=_terminal(CODE=used_code))
        assert refused.returncode != 0 and refused.stdout == "", refused.stdout
        assert refused.stderr.startswith("The token endpoint answered: {") and '"invalid_grant"' in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    # What the demo and the README say to do then: the authorize URL again, signed in, gives a fresh code at once.
    with requests.Session() as browser:
        sign_in_over_http(browser, live_server.url, demo["authorize_url"], "ada@example.org")
        again = browser.get(demo["authorize_url"], allow_redirects=False, timeout=10)
    assert again.status_code == 302 and again.headers["Location"].startswith("http://127.0.0.1:8400/callback?")
    fresh = run_shell(demo["exchange_command"], cwd=checkout,
                      env=_terminal(CODE=query_of(again.headers["Location"])["code"]))  # fmt: skip
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["sub"] == claims["sub"], fresh.stderr


def test_the_demo_command_run_again_answers_with_the_same_organisation(live_server, checkout):
    lines = quickstart_block("newcomer")
    first, second = (
        json.loads(run_shell(lines + " --json", cwd=checkout, env=_terminal(BASE_URL=live_server.url)).stdout)
        for _ in range(2)
    )
    assert second["created"] is False and second["api_token"] is None
    for member in ("client_id", "client_secret", "user", "exchange_command"):
        assert second[member] == first[member], member
    human = run_shell(lines, cwd=checkout, env=_terminal(BASE_URL=live_server.url))
    assert human.returncode == 0 and "The demo organisation exists already" in human.stdout, human.stderr
    listed = run_shell("tessera-admin clients list --json", cwd=checkout, env=_terminal())
    assert [row["name"] for row in json.loads(listed.stdout)].count("Demo organisation") == 1

    other = json.loads(run_shell(lines + " --json --email grace@example.org", cwd=checkout,
                                 env=_terminal(BASE_URL=live_server.url)).stdout)  # fmt: skip
    assert other["client_id"] == first["client_id"] and other["user"]["email_address"] == "grace@example.org"
    assert other["user"]["user_id"] != first["user"]["user_id"]


def test_the_demo_command_names_no_outbox_the_service_does_not_serve(live_server, checkout):
    lines = quickstart_block("newcomer")
    env = _terminal(BASE_URL=live_server.url, DEV_OUTBOX="")
    demo = json.loads(run_shell(lines + " --json", cwd=checkout, env=env).stdout)
    assert demo["outbox_url"] is None
    human = run_shell(lines, cwd=checkout, env=env)
    assert human.returncode == 0, human.stderr
    assert "/dev/outbox?" not in human.stdout and "e-mailed to ada@example.org" in human.stdout


def test_readme_agent_lines_host_a_card(live_server, checkout):
    """The key pasted into `tessera login` (never shown again), the DID, the card scaffolded and hosted."""
    from tests.support.agents import claim_key_over_http

    key = claim_key_over_http(live_server)
    config = checkout.parent / "config"
    env = _terminal(TESSERA_TESTNET_URL=live_server.url, XDG_CONFIG_HOME=str(config), TESSERA_API_KEY="",
                    TESSERA_NETWORK_URL="")  # fmt: skip
    result = run_shell(quickstart_block("agent"), cwd=checkout, env=env, stdin=key + "\n")
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert key not in result.stdout + result.stderr
    assert (config / "tessera" / "credentials.json").exists()
    stored, whoami, *rest = result.stdout.split("\n", 2)
    assert stored.startswith(f"Stored the key of {address_from_private_key(key)} for testnet")
    did = whoami.removeprefix("DID:").strip()
    assert did.startswith("did:tessera:") and f"Address: {address_from_private_key(key)}" in rest[0]
    assert "Wrote agent-card.json" in result.stdout
    # The job that hosts the card prints its address from the BASE_URL of the process running it:
    # this server's on SQLite (jobs run in process), the suite's worker's on PostgreSQL + Redis.
    printed = [line for line in result.stdout.splitlines() if line.startswith("Public card: ")]
    assert len(printed) == 1 and printed[0].endswith(f"/api/agent-card/{did}"), result.stdout
    public_url = f"{live_server.url}/api/agent-card/{did}"
    card = httpx.get(public_url, timeout=10)
    assert card.status_code == 200 and card.content == (checkout / "agent-card.json").read_bytes()
    assert card.json()["name"] == "Echo"


def test_the_claim_pages_next_lines_are_the_readmes_and_sign_in(live_server, checkout):
    """The lines the claim page shows under the key, run as written with the key pasted: no key on a
    command line, the README's `tessera login` and `TESSERA_TESTNET_URL`."""
    import html
    import re

    from tests.support.agents import _CSRF_RE, _KEY_RE

    with live_server.http() as http:
        form = http.get("/claim")
        claimed = http.post("/claim", data={"csrf_token": _CSRF_RE.search(form.text).group(1), "kind": "agent"})
    key = _KEY_RE.search(claimed.text).group(1)
    lines = html.unescape(re.search(r'<pre id="next-commands"><code>(.*?)</code></pre>', claimed.text, re.S).group(1))
    assert key not in lines and "TESSERA_API_KEY" not in claimed.text and "TESSERA_NETWORK_URL" not in claimed.text
    assert "tessera login --env testnet" in lines and "tessera login --env testnet" in quickstart_block("agent")
    assert f"export TESSERA_TESTNET_URL={live_server.url}" in lines and "TESSERA_TESTNET_URL" in README.read_text()

    config = checkout.parent / "claim-config"
    env = _terminal(XDG_CONFIG_HOME=str(config), TESSERA_API_KEY="", TESSERA_NETWORK_URL="", TESSERA_TESTNET_URL="")
    result = run_shell(lines, cwd=checkout, env=env, stdin=key + "\n")
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert f"Address: {address_from_private_key(key)}" in result.stdout and "DID:     did:tessera:" in result.stdout
    assert key not in result.stdout + result.stderr
