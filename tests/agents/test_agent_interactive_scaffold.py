"""`tessera agent create-card` on a real pseudo-terminal: it asks, and writes what was answered."""

from __future__ import annotations

import json

from app.client.cards import REGISTRATION_TYPE, find_placeholders
from tests.support.pty_terminal import TESSERA, Terminal

DID = "did:tessera:" + "ab" * 20


def test_interactive_scaffold_asks_for_everything(tmp_path):
    terminal = Terminal([str(TESSERA), "agent", "create-card", "--out", "card.json"], cwd=tmp_path)
    terminal.answer("Agent name:", "Echo")
    terminal.answer("Description:", "Echoes what it hears")
    terminal.answer("Image URL", "https://echo.example/echo.png")
    terminal.answer("Include an A2A service?", "y")
    terminal.answer("A2A agent card URL", "https://echo.example/.well-known/agent-card.json")
    terminal.answer("Include an MCP service?", "n")
    terminal.answer("Include the DID service?", "")
    terminal.answer("Agent DID", DID)
    terminal.answer("x402 payments?", "y")
    terminal.expect("Wrote card.json")
    assert terminal.finish() == 0

    card = json.loads((tmp_path / "card.json").read_text())
    assert card["type"] == REGISTRATION_TYPE
    assert card["name"] == "Echo" and card["description"] == "Echoes what it hears"
    assert card["image"] == "https://echo.example/echo.png"
    assert card["services"] == [
        {"name": "A2A", "endpoint": "https://echo.example/.well-known/agent-card.json", "version": "0.3.0"},
        {"name": "DID", "endpoint": DID, "version": "v1"},
    ]
    assert card["x402Support"] is True
    assert find_placeholders(card) == []


def test_blank_answers_leave_placeholders_and_say_so(tmp_path):
    terminal = Terminal([str(TESSERA), "agent", "create-card"], cwd=tmp_path)
    terminal.answer("Agent name:", "Echo")
    terminal.answer("Description:", "Echoes")
    terminal.answer("Image URL", "")
    terminal.answer("Include an A2A service?", "n")
    terminal.answer("Include an MCP service?", "y")
    terminal.answer("MCP endpoint URL", "")
    terminal.answer("Include the DID service?", "n")
    terminal.answer("x402 payments?", "")
    terminal.expect("Wrote agent-card.json")
    terminal.expect("/image")
    terminal.expect("/services/0/endpoint")
    assert terminal.finish() == 0
    card = json.loads((tmp_path / "agent-card.json").read_text())
    assert [service["name"] for service in card["services"]] == ["MCP"]
    assert card["x402Support"] is False


def test_flags_skip_the_questions_on_a_terminal(tmp_path):
    terminal = Terminal([str(TESSERA), "agent", "create-card", "--name", "Quiet"], cwd=tmp_path)
    terminal.expect("Wrote agent-card.json")
    assert terminal.finish() == 0
    assert "Agent name:" not in terminal.seen
    assert json.loads((tmp_path / "agent-card.json").read_text())["name"] == "Quiet"
