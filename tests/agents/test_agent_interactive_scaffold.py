"""`tessera agent create-card` on a real pseudo-terminal: it asks, and writes what was answered."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from app.client.cards import REGISTRATION_TYPE, find_placeholders

TESSERA = Path(sys.executable).with_name("tessera")
DID = "did:tessera:" + "ab" * 20


class Terminal:
    """A child process on a pseudo-terminal, driven prompt by prompt."""

    def __init__(self, args: list[str], cwd: Path):
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, close_fds=True, env={**os.environ, "TERM": "dumb"}
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"never saw {text!r}; output so far: {self.seen!r}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"terminal closed before {text!r}; output: {self.seen!r}"
                self.seen += chunk.decode("utf-8", "replace")
        self.seen = self.seen[self.seen.index(text) + len(text) :]

    def answer(self, prompt: str, reply: str) -> None:
        self.expect(prompt)
        os.write(self.master, reply.encode() + b"\r")

    def finish(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096).decode("utf-8", "replace")
                except OSError:
                    break
        code = self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        os.close(self.master)
        return code


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
