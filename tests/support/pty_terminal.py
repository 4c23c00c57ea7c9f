"""A child process on a pseudo-terminal, for tests of what the CLI does on a real terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

TESSERA = Path(sys.executable).with_name("tessera")


class Terminal:
    """A child process on a pseudo-terminal, driven prompt by prompt."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None):
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            close_fds=True,
            env={**os.environ, "TERM": "dumb", **(env or {})},
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
