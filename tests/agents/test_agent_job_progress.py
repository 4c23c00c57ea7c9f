"""While the CLI waits for a job it shows the job's state on a terminal, and nothing otherwise."""

from __future__ import annotations

import json

from click.testing import CliRunner

from app.agents import ethereum
from app.client.cli import main
from tests.support.fake_agent_network import JOB_ID, FakeNetwork, serve
from tests.support.pty_terminal import TESSERA, Terminal

AGENT = "did:tessera:" + "a1" * 20
CARD = b'{"name": "Slow to host"}'


def _slow_network() -> FakeNetwork:
    """A network whose host-card job stays queued, then running, for a couple of seconds each."""
    return FakeNetwork(
        agent_did=AGENT,
        job_states=["queued"] * 6 + ["running"] * 6 + ["succeeded"],
        job_result={"did": AGENT, "size": len(CARD), "public_url": f"/api/agent-card/{AGENT}", "charged": 10},
    )


def test_a_terminal_shows_the_job_state_while_waiting(tmp_path):
    (tmp_path / "card.json").write_bytes(CARD)
    with serve(_slow_network()) as network:
        terminal = Terminal(
            [str(TESSERA), "host-card", "--file", "card.json"],
            cwd=tmp_path,
            env={
                "TESSERA_NETWORK_URL": network.url,
                "TESSERA_API_KEY": ethereum.generate_private_key(),
                "TERM": "xterm-256color",
                "COLUMNS": "200",
            },
        )
        terminal.expect(f"host-card: job {JOB_ID} queued")
        terminal.expect(f"host-card: job {JOB_ID} running")
        terminal.expect(f"Hosted {len(CARD)} bytes for {AGENT}")
        assert terminal.finish() == 0
    assert network.hosted == [CARD]
    assert network.polls >= 13


def test_without_a_terminal_only_the_result_is_printed(tmp_path):
    card = tmp_path / "card.json"
    card.write_bytes(CARD)
    with serve(_slow_network()) as network:
        env = {"TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": ethereum.generate_private_key()}
        result = CliRunner().invoke(main, ["--json", "host-card", "--file", str(card)], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["state"] == "succeeded"
    assert "queued" not in result.stderr and "running" not in result.stderr
