"""The `tessera` CLI forgives habits: global options anywhere, one-line errors, JSON error documents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from app.agents.ethereum import generate_private_key
from app.client.cli import main
from tests.support.agents import DID, UNREACHABLE
from tests.support.fake_agent_network import JOB_ID, FakeNetwork, serve
from tests.support.pty_terminal import TESSERA


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "--api-key", "0x1234", "whoami"],
        ["whoami", "--json", "--api-key", "0x1234"],
        ["--api-key", "0x1234", "whoami", "--json"],
    ],
)
def test_global_options_before_or_after_the_command(runner, args):
    result = runner.invoke(main, args, env={"TESSERA_NETWORK_URL": UNREACHABLE})
    assert result.exit_code == 3, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "AuthenticationFailed"
    assert "32 bytes" in error["message"]
    assert "Traceback" not in result.output


def _card(name: str) -> bytes:
    """The smallest card the network hosts: an ERC-8004 registration file."""
    return json.dumps(
        {
            "type": "https://eips.ethereum.org/EIPS/eip-8004#registration-v1",
            "name": name,
            "description": f"{name}, a test agent",
            "services": [{"name": "A2A", "endpoint": "https://agent.example/a2a.json"}],
        }
    ).encode()


def test_env_after_a_nested_command_is_accepted(runner):
    result = runner.invoke(main, ["did", "get", DID, "--env", "production"])
    assert result.exit_code == 2
    assert "TESSERA_PRODUCTION_URL" in result.output, "--env production after the command took effect"
    result = runner.invoke(main, ["--env", "production", "did", "get", DID, "--env", "testnet"])
    assert "TESSERA_PRODUCTION_URL" not in result.output, "the later --env wins"
    assert "No such option" not in result.output


def test_options_after_a_subgroup_name(runner, tmp_path):
    out = tmp_path / "card.json"
    result = runner.invoke(main, ["agent", "--json", "create-card", "--out", str(out), "--name", "Echo"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["path"] == str(out)


def test_unwritable_out_is_one_line_without_traceback(runner):
    result = runner.invoke(main, ["agent", "create-card", "--out", "/nonexistent/dir/c.json", "--name", "Echo"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["Error: cannot write /nonexistent/dir/c.json: No such file or directory"]


def test_json_usage_error_is_a_json_document(runner):
    result = runner.invoke(main, ["--json", "--env", "staging", "whoami"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert "staging" in error["message"]
    result = runner.invoke(main, ["did", "get", "--json"])
    assert result.exit_code == 2
    assert "DID" in json.loads(result.stdout)["error"]["message"]


def test_json_network_error_is_a_json_document(runner):
    result = runner.invoke(
        main, ["whoami", "--json", "--api-key", generate_private_key()], env={"TESSERA_NETWORK_URL": UNREACHABLE}
    )
    assert result.exit_code == 1
    assert "cannot reach the network" in json.loads(result.stdout)["error"]["message"]


def _one_json_error(result, exit_code: int) -> dict:
    """The failure as `--json` must give it: one JSON document on stdout, one line on stderr, no traceback."""
    assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    error = json.loads(result.stdout)["error"]
    assert error["message"]
    # Usage errors keep click's two lines of usage hint above the error itself.
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(("Usage: ", "Try '"))]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return error


def test_json_bad_out_path_is_a_json_document(runner, tmp_path):
    args = ["agent", "create-card", "--name", "Echo", "--no-did", "--json"]
    error = _one_json_error(runner.invoke(main, [*args, "--out", "/nonexistent/dir/c.json"]), 1)
    assert error["message"] == "cannot write /nonexistent/dir/c.json: No such file or directory"
    error = _one_json_error(runner.invoke(main, [*args, "--out", str(tmp_path)]), 2)
    assert "is a directory" in error["message"]


def test_json_missing_arguments_are_json_documents(runner):
    assert "JOB_ID" in _one_json_error(runner.invoke(main, ["job", "show", "--json"]), 2)["message"]
    assert "--file" in _one_json_error(runner.invoke(main, ["--json", "host-card"]), 2)["message"]
    assert "--uri" in _one_json_error(runner.invoke(main, ["set-card", "--json"]), 2)["message"]


@pytest.mark.parametrize(
    ("status", "content_type", "body", "message"),
    [
        (500, "text/html", b"<html><body>Internal Server Error</body></html>", "HTTP 500"),
        (502, "text/plain", b"Bad Gateway", "HTTP 502"),
        (
            503,
            "application/problem+json",
            b'{"status": 503, "title": "Unavailable", "detail": "db down"}',
            "HTTP 503: db down",
        ),
        (
            404,
            "application/problem+json",
            b'{"status": 404, "code": "not_found", "title": "Not Found"}',
            "HTTP 404: Not Found",
        ),
    ],
)
def test_json_error_answers_of_the_network_are_json_documents(runner, status, content_type, body, message):
    network = FakeNetwork(agent_did=DID, failure=(status, content_type, body))
    with serve(network):
        env = {"TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": generate_private_key()}
        for args in (["whoami"], ["did", "get", DID], ["did", "get", DID, "--full"], ["job", "show", JOB_ID]):
            error = _one_json_error(runner.invoke(main, [*args, "--json"], env=env), 1)
            assert error["status"] == status and error["message"] == message, (args, error)


def test_did_get_of_a_network_answering_no_document_fails(runner):
    with serve(FakeNetwork(agent_did=DID, failure=(200, "application/json", b"[1, 2]"))) as network:
        result = runner.invoke(main, ["did", "get", DID, "--json"], env={"TESSERA_NETWORK_URL": network.url})
    assert "without a DID document" in _one_json_error(result, 1)["message"]


def test_json_api_errors_of_the_service_are_json_documents(runner, live_server, claimed_key, tmp_path):
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    error = _one_json_error(runner.invoke(main, ["job", "show", JOB_ID, "--json"], env=env), 1)
    assert (error["status"], error["code"]) == (404, "not_found")
    error = _one_json_error(runner.invoke(main, ["did", "get", "did:tessera:nope", "--json"], env=env), 1)
    assert error["status"] == 400
    card = tmp_path / "card.json"
    card.write_text("not json")
    result = runner.invoke(main, ["host-card", "--file", str(card), "--json"], env=env)
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert (error["status"], error["code"]) == (422, "invalid_card") and "card" in error["errors"]


# Runs a command as a terminal's foreground job runs it: with SIGINT's default disposition. A test run started
# in the background by a non-interactive shell (`pytest &` in a script) ignores SIGINT, every child inherits
# that, and Python then installs no KeyboardInterrupt handler: the command would wait on, deaf to Ctrl-C.
FOREGROUND = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]


def test_interrupted_wait_with_json_is_a_json_document(tmp_path):
    """Ctrl-C while a command waits for its job: the JSON error document still comes on stdout."""
    with serve(FakeNetwork(agent_did=DID, job_states=["queued"])) as network:
        env = {**os.environ, "TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": generate_private_key()}
        process = subprocess.Popen([*FOREGROUND, str(TESSERA), "job", "show", JOB_ID, "--wait", "--json"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            for _ in range(400):
                if network.polls or process.poll() is not None:
                    break
                time.sleep(0.05)
            assert network.polls, "the CLI polled the job"
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 1
    assert json.loads(stdout)["error"]["kind"] == "Aborted"
    assert "Traceback" not in stderr and "Aborted!" in stderr


def test_job_timeout_comes_from_the_environment(runner):
    network = FakeNetwork(agent_did=DID, job_states=["queued", "succeeded"])
    with serve(network):
        env = {"TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": generate_private_key()}
        result = runner.invoke(main, ["job", "show", JOB_ID, "--wait", "--json"],
                               env={**env, "TESSERA_JOB_TIMEOUT": "0"})  # fmt: skip
        error = _one_json_error(result, 1)
        assert error["kind"] == "JobTimeout" and network.polls == 1
        assert f"tessera job show {JOB_ID} --wait" in result.stderr
        result = runner.invoke(main, ["job", "show", JOB_ID, "--wait", "--json"], env=env)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["state"] == "succeeded"
        result = runner.invoke(main, ["whoami", "--json"], env={**env, "TESSERA_JOB_TIMEOUT": "soon"})
        error = _one_json_error(result, 2)
        assert "TESSERA_JOB_TIMEOUT" in error["message"]


def test_insufficient_credits_says_how_to_get_credits(runner, live_server, tmp_path):
    card = tmp_path / "card.json"
    card.write_bytes(_card("x"))
    env = {"TESSERA_NETWORK_URL": live_server.url}
    key = generate_private_key()
    result = runner.invoke(main, ["host-card", "--file", str(card), "--api-key", key], env=env)
    assert result.exit_code == 1
    assert "costs 10 credits, 0 available" in result.output
    assert f"{live_server.url}/claim" in result.output
    assert "tessera-admin agents grant-credits" in result.output
    result = runner.invoke(main, ["host-card", "--file", str(card), "--api-key", key, "--json"], env=env)
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "InsufficientCredits" and "/claim" in error["hint"]


def test_field_errors_are_printed_field_by_field(runner, live_server, claimed_key):
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    result = runner.invoke(main, ["set-card", "--uri", "javascript:alert(1)"], env=env)
    assert result.exit_code == 1
    assert "\n  uri: " in result.output, result.output
    result = runner.invoke(main, ["set-card", "--uri", "javascript:alert(1)", "--json"], env=env)
    assert "uri" in json.loads(result.stdout)["error"]["errors"]


def test_create_card_flags_make_a_hostable_card(runner, live_server, claimed_key, tmp_path):
    out = tmp_path / "card.json"
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    args = ["agent", "create-card", "--out", str(out), "--name", "Echo", "--description", "Echoes"]
    args += ["--image", "https://echo.example/echo.png", "--a2a-url", "https://echo.example/a2a.json", "--no-mcp"]
    result = runner.invoke(main, [*args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["placeholders"] == []
    did = json.loads(runner.invoke(main, ["whoami", "--json"], env=env).stdout)["did"]
    assert [s["name"] for s in document["card"]["services"]] == ["A2A", "DID"]
    assert document["card"]["services"][0]["endpoint"] == "https://echo.example/a2a.json"
    assert document["card"]["services"][1]["endpoint"] == did, "the DID comes from the key"
    result = runner.invoke(main, ["host-card", "--file", str(out), "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["state"] == "succeeded"


def test_create_card_can_drop_every_service(runner, tmp_path):
    out = tmp_path / "card.json"
    args = ["agent", "create-card", "--out", str(out), "--name", "E", "--no-a2a", "--no-mcp", "--no-did"]
    result = runner.invoke(main, [*args, "--mcp-url", "https://x.example/mcp"])
    assert result.exit_code == 2
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["services"] == []


@pytest.fixture
def unconsumed_job(app, agent_client):
    """A job of the agent that no worker takes, queued long ago (as when every worker is down)."""
    from datetime import timedelta

    from app.db import utcnow
    from app.extensions import db
    from app.jobs.models import Job

    with app.app_context():
        job = Job(kind="tests.unconsumed", state="queued", payload={}, agent_did=agent_client.did)
        job.created_at = job.published_at = utcnow() - timedelta(seconds=3600)
        db.session.add(job)
        db.session.commit()
        job_id = job.id
    yield job_id
    with app.app_context():
        db.session.delete(db.session.get(Job, job_id))
        db.session.commit()


def test_readyz_reports_a_queue_no_worker_consumes(live_server, unconsumed_job):
    with live_server.http() as http:
        ready = http.get("/readyz")
    assert ready.status_code == 200
    queue = ready.json()["queue"]
    assert queue["consuming"] is False
    assert queue["oldest_queued_job_age_seconds"] >= 3600
    assert "worker" in queue["detail"]


def test_job_show_follows_a_queued_job(runner, live_server, claimed_key, unconsumed_job):
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    result = runner.invoke(main, ["job", "show", unconsumed_job], env=env)
    assert result.exit_code == 0, result.output
    assert "State:    queued" in result.output
    assert "warning: no worker is taking jobs" in result.stderr
    result = runner.invoke(main, ["job", "show", unconsumed_job, "--wait", "--timeout", "0.2"], env=env)
    assert result.exit_code == 1
    assert f"tessera job show {unconsumed_job} --wait" in result.output
    assert "no worker is taking jobs" in result.output
    result = runner.invoke(main, ["job", "show", unconsumed_job, "--wait", "--timeout", "0", "--json"], env=env)
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "JobTimeout" and error["queue"]["consuming"] is False


def test_job_show_of_a_finished_job(runner, live_server, claimed_key, agent_client):
    job = agent_client.host_card(_card("x"))
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    result = runner.invoke(main, ["job", "show", job["id"], "--wait", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["state"] == "succeeded"


def test_registry_defaults_to_own_did_and_never_prints_none(runner, live_server, claimed_key, agent_client):
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    agent_client.host_card(_card("x"))
    result = runner.invoke(main, ["agent", "registry", "--full", "--json"], env=env)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["did"] == agent_client.did and record["owner"] is None
    result = runner.invoke(main, ["agent", "registry", "--full"], env=env)
    assert result.exit_code == 0, result.output
    assert "None" not in result.output
    assert "owner: (none)" in result.output
    assert "card.published: yes" in result.output


def test_whoami_shows_a_deactivated_account(runner, live_server, claimed_key, agent_client):
    env = {"TESSERA_NETWORK_URL": live_server.url, "TESSERA_API_KEY": claimed_key}
    assert "Status:  active" in runner.invoke(main, ["whoami"], env=env).output
    agent_client.host_card(_card("x"))
    agent_client.deregister_agent()
    result = runner.invoke(main, ["whoami"], env=env)
    assert result.exit_code == 0, result.output
    assert "Status:  deactivated" in result.output


def test_unpublished_own_card_is_not_advertised_in_the_did_document(live_server, agent_client):
    did = agent_client.did
    agent_client.host_card(_card("x"))
    own = f"{live_server.url}/api/agent-card/{did}"
    agent_client.set_card(own)
    with live_server.http() as http:
        assert http.get(f"/api/did/{did}").json()["service"][0]["serviceEndpoint"] == own
        agent_client.card_unpublish()
        assert http.get(own).status_code == 404
        assert "service" not in http.get(f"/api/did/{did}").json()
        agent_client.host_card(_card("y"))
        assert http.get(f"/api/did/{did}").json()["service"][0]["serviceEndpoint"] == own
