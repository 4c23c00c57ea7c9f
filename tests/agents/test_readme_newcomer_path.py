"""The README's newcomer path, run as written (its shell lines) against a live service."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from app.agents.ethereum import address_from_private_key
from tests.support.environment import REPO_ROOT

README = REPO_ROOT / "README.md"


def readme_block(marker: str) -> str:
    """The shell lines of the fenced block right after `<!-- quickstart:marker -->`."""
    match = re.search(rf"<!-- quickstart:{marker} -->\n```bash\n(.*?)\n```", README.read_text(), re.S)
    assert match, f"README has no quickstart:{marker} block"
    return match.group(1)


def _bash(script: str, *, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=REPO_ROOT, input=stdin, capture_output=True,
        text=True, timeout=180, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _documents(text: str) -> list:
    """The JSON documents printed one after another (each on one line or several)."""
    decoder, documents, index = json.JSONDecoder(), [], 0
    while (index := len(text) - len(text[index:].lstrip())) < len(text):
        document, index = decoder.raw_decode(text, index)
        documents.append(document)
    return documents


@pytest.fixture
def activated_checkout():
    if not (REPO_ROOT / ".venv" / "bin" / "activate").exists():
        pytest.skip("the README path activates .venv of the checkout, which the quick start creates")


def test_readme_says_the_second_terminal_and_what_the_test_command_installs():
    text = README.read_text()
    assert "second terminal" in text
    test_command = readme_block("test")
    assert test_command.index('echo "Installing Debian packages chromium and chromium-driver') < test_command.index(
        "apt-get update"
    )
    assert "--api-key" not in readme_block("agent") and "tessera login" in readme_block("agent")


def test_readme_newcomer_lines_reach_a_signed_in_user(live_server, activated_checkout):
    """The demo command's authorize URL through the hosted pages, then its printed exchange: the claims."""
    import requests

    from tests.support.oidc import query_of, sign_in_over_http

    lines = readme_block("newcomer")
    assert lines.splitlines() == [". .venv/bin/activate", "flask --app app clients demo"]
    result = _bash(lines + " --json", env={"BASE_URL": live_server.url})
    assert result.returncode == 0, (result.stdout, result.stderr)
    demo = json.loads(result.stdout)
    assert demo["authorize_url"].startswith(f"{live_server.url}/v1/openidc/authorize?")
    assert demo["outbox_url"] == f"{live_server.url}/dev/outbox?to=ada%40example.org"

    human = _bash(lines, env={"BASE_URL": live_server.url})
    assert human.returncode == 0 and "Open this URL in a browser" in human.stdout, human.stderr

    with requests.Session() as browser:
        callback = sign_in_over_http(browser, live_server.url, demo["authorize_url"], "ada@example.org")
    assert callback.startswith("http://127.0.0.1:8400/callback?")
    code = query_of(callback)["code"]
    exchanged = _bash(demo["exchange_command"], env={"CODE": code})
    assert exchanged.returncode == 0, (exchanged.stdout, exchanged.stderr)
    claims = json.loads(exchanged.stdout)
    assert claims["sub"] and claims["aud"] in (str(demo["client_id"]), [str(demo["client_id"])])
    assert claims["sub"] in (demo["user"]["did"], str(demo["user"]["user_id"])), claims


def test_readme_api_lines_create_an_organisation_and_run_a_job(live_server, activated_checkout):
    lines = readme_block("api")
    assert "TOKEN=$(flask --app app clients create-master" in lines and "--json" in lines
    assert "127.0.0.1:5000" not in lines, "the address follows BASE_URL"
    result = _bash(". .venv/bin/activate\n" + lines + '\necho "token=$TOKEN"', env={"BASE_URL": live_server.url})
    assert result.returncode == 0, (result.stdout, result.stderr)
    user, job = _documents(result.stdout.rsplit("token=", 1)[0])
    assert user["data"]["user_id"] and user["data"]["did"], user
    assert job["data"]["id"] and job["data"]["state"] in {"queued", "running", "succeeded"}, job
    assert len(result.stdout.splitlines()[-1].removeprefix("token=")) > 20
    assert "Traceback" not in result.stderr


def test_readme_agent_lines_store_the_key_and_use_it(live_server, activated_checkout, tmp_path):
    from tests.support.agents import claim_key_over_http

    key = claim_key_over_http(live_server)
    script = readme_block("agent").replace("--env testnet whoami", "--env testnet whoami --json")
    env = {"TESSERA_NETWORK_URL": live_server.url, "XDG_CONFIG_HOME": str(tmp_path), "TESSERA_API_KEY": ""}
    result = _bash(script, stdin=key + "\n", env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert key not in result.stdout + result.stderr
    stored, whoami = result.stdout.split("\n", 1)
    assert stored.startswith("Stored the key of ")
    account = json.loads(whoami)
    assert account["address"] == address_from_private_key(key)
    assert (tmp_path / "tessera" / "credentials.json").exists()
