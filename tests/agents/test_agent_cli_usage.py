"""CLI behaviour that needs no network: usage errors, scaffolding, local refusals."""

import json

import pytest

from app.agents.ethereum import generate_private_key
from app.client.cards import render_card, scaffold_card
from app.client.cli import main
from tests.support.agents import DID, UNREACHABLE


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["--env", "staging", "whoami"],
        ["host-card"],
        ["host-card", "--file", "/nonexistent/card.json"],
        ["set-card"],
        ["did", "get"],
        ["agent", "registry", DID, "extra"],
        ["consent", "request", "--owner", DID],
        ["consent", "approve"],
        ["agent", "create-card", "--unknown-flag"],
    ],
)
def test_usage_errors_exit_2(runner, args):
    result = runner.invoke(main, args)
    assert result.exit_code == 2, result.output


def test_owner_without_agent_is_a_usage_error(runner, tmp_path):
    card = tmp_path / "card.json"
    card.write_bytes(b"{}")
    result = runner.invoke(main, ["host-card", "--file", str(card), "--owner", DID])
    assert result.exit_code == 2
    assert "--owner and --agent go together" in result.output


def test_production_without_url_is_a_usage_error(runner):
    result = runner.invoke(main, ["--env", "production", "did", "get", DID])
    assert result.exit_code == 2
    assert "TESSERA_PRODUCTION_URL" in result.output


def test_deregister_without_terminal_needs_yes(runner):
    result = runner.invoke(main, ["agent", "deregister"])
    assert result.exit_code == 2
    assert "--yes" in result.output


def test_commands_needing_a_key_exit_3_without_one(runner):
    result = runner.invoke(main, ["whoami"], env={"TESSERA_NETWORK_URL": UNREACHABLE})
    assert result.exit_code == 3
    assert "TESSERA_API_KEY" in result.output and "run `tessera login`" in result.output


def test_malformed_key_exits_3(runner):
    result = runner.invoke(main, ["--api-key", "0x1234", "whoami"], env={"TESSERA_NETWORK_URL": UNREACHABLE})
    assert result.exit_code == 3


def test_unreachable_network_is_an_error_exit_1(runner):
    key = generate_private_key()
    result = runner.invoke(main, ["--api-key", key, "whoami"], env={"TESSERA_NETWORK_URL": UNREACHABLE})
    assert result.exit_code == 1
    assert "cannot reach the network" in result.output


def test_create_card_with_flags_writes_the_scaffold(runner, tmp_path):
    out = tmp_path / "card.json"
    result = runner.invoke(
        main,
        [
            "agent",
            "create-card",
            "--out",
            str(out),
            "--name",
            "Echo",
            "--description",
            "Echoes",
            "--did",
            DID,
            "--x402",
        ],
    )
    assert result.exit_code == 0, result.output
    card = json.loads(out.read_text())
    assert card["name"] == "Echo"
    assert card["x402Support"] is True
    assert {"name": "DID", "endpoint": DID, "version": "v1"} in card["services"]
    assert "/services/0/endpoint" in result.output


def test_create_card_refuses_to_overwrite_without_force(runner, tmp_path):
    out = tmp_path / "card.json"
    out.write_text("keep me")
    result = runner.invoke(main, ["agent", "create-card", "--out", str(out), "--name", "Echo"])
    assert result.exit_code == 1
    assert out.read_text() == "keep me"
    result = runner.invoke(main, ["agent", "create-card", "--out", str(out), "--name", "Echo", "--force"])
    assert result.exit_code == 0
    assert json.loads(out.read_text())["name"] == "Echo"


def test_create_card_json_output_is_one_document(runner, tmp_path):
    out = tmp_path / "card.json"
    result = runner.invoke(main, ["--json", "agent", "create-card", "--out", str(out), "--name", "Echo"])
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["path"] == str(out)
    assert "/description" in document["placeholders"]


def test_host_card_refuses_placeholders_before_any_request(runner, tmp_path):
    card = tmp_path / "card.json"
    card.write_bytes(render_card(scaffold_card(name="Echo", did=DID)))
    key = generate_private_key()
    result = runner.invoke(
        main,
        ["--json", "--api-key", key, "host-card", "--file", str(card)],
        env={"TESSERA_NETWORK_URL": UNREACHABLE},
    )
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "CardHasPlaceholders"
    assert "/services/0/endpoint" in error["pointers"]
