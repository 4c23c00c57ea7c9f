"""The README's run command (web, worker and beat under honcho) on another port: every URL follows it,
those the operator commands print in another terminal too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.client.library import TesseraClient
from tests.support.agents import LiveServer, claim_key_over_http, registration_card
from tests.support.bench import free_port, wait_for_url
from tests.support.docs import quickstart_block
from tests.support.environment import REPO_ROOT

INSTALL_AND_MIGRATE = "flask --app app db upgrade && "
# Settings of this test run that would otherwise leak into the service started here.
_RUN_SETTINGS = ("DATABASE_URL", "REDIS_URL", "DIRECT_DATABASE_URL", "DIRECT_REDIS_URL", "CELERY_ALWAYS_EAGER",
                 "CELERY_QUEUE", "BASE_URL", "PORT", "SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY",
                 "AGENT_NETWORK_URL", "OIDC_ISSUER")  # fmt: skip


def _stop(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def test_run_command_is_one_line_that_starts_the_three_processes():
    command = quickstart_block("run")
    assert "\n" not in command, ".ci/run takes the first line under the marker"
    assert INSTALL_AND_MIGRATE in command and command.endswith("honcho start web worker beat")
    assert "BASE_URL=${BASE_URL:-http://localhost:${PORT:-5000}} honcho start" in command, "one BASE_URL for all"


@pytest.mark.embedded
def test_run_command_on_another_port_serves_pages_discovery_and_worker_urls_there(tmp_path: Path):
    """honcho gives the worker and beat PORT+100 and PORT+200: BASE_URL must still name the web's port."""
    service = quickstart_block("run").split(INSTALL_AND_MIGRATE, 1)[1]
    port = free_port()
    url = f"http://localhost:{port}"
    env = {name: value for name, value in os.environ.items() if name not in _RUN_SETTINGS}
    env.update(PORT=str(port), TESSERA_INSTANCE_DIR=str(tmp_path / "instance"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    migrated = subprocess.run(["flask", "--app", "app", "db", "upgrade"], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    log = tmp_path / "service.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(["bash", "-c", service], cwd=REPO_ROOT, env=env, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        wait_for_url(f"{url}/readyz", process, timeout=90)
        discovery = httpx.get(f"{url}/.well-known/openid-configuration", timeout=10).json()
        assert discovery["issuer"] == url and discovery["authorization_endpoint"].startswith(f"{url}/")
        key = claim_key_over_http(LiveServer(url))
        with TesseraClient(url, api_key=key, job_timeout=60) as agent:
            job = agent.host_card(registration_card("Port follower"))
            assert job["state"] == "succeeded", job
            assert job["result"]["public_url"] == f"{url}/api/agent-card/{agent.did}", "built by the worker"
            assert httpx.get(job["result"]["public_url"], timeout=10).status_code == 200
        # The second terminal, without PORT or BASE_URL: the operator commands name the port served.
        terminal = {name: value for name, value in env.items() if name not in {"PORT", "DEV_OUTBOX"}}
        demo = subprocess.run([sys.executable, "-c", "import sys; from app.admin import main; sys.exit(main())",
                               "clients", "demo", "--json"], cwd=tmp_path, env=terminal, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert demo.returncode == 0, demo.stderr
        printed = json.loads(demo.stdout)
        assert printed["authorize_url"].startswith(f"{url}/v1/openidc/authorize?")
        assert printed["outbox_url"] == f"{url}/dev/outbox?to=ada%40example.org"
        assert httpx.get(printed["outbox_url"], timeout=10).status_code == 200
        # Ctrl-C reaches honcho (its processes run in sessions of their own): all stop within its grace.
        os.kill(process.pid, signal.SIGINT)
        process.wait(timeout=20)
        assert "SIGKILL" not in log.read_text(), "honcho had to kill a process"
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n--- service log ---\n{log.read_text()[-4000:]}") from failure
    finally:
        _stop(process)
