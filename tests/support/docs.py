"""The commands of README.md and docs/*.md: their fenced blocks, what each says about its test, and
where they run (a copy of the checkout, a shell, an environment as on a fresh machine).

A block's notes are the HTML comments on the lines right above its opening fence, e.g.
`<!-- docs-test: covered by tests/foundation/test_readme_run_command.py -->` or
`<!-- quickstart:run -->` (.ci/run and the README tests find a quick-start block by the latter, which
is therefore always the last note: the line right above the fence). A `text` block right after a
`bash` block (blank lines aside) is the output the page shows for it. docs/development.md says what
the notes mean; tests/foundation/test_docs_commands.py holds the pages to them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.environment import REPO_ROOT, copy_repository

README = REPO_ROOT / "README.md"
DOCS_DIR = REPO_ROOT / "docs"
_FENCE = re.compile(r"^```(?P<language>\S*)\s*$")
_NOTE = re.compile(r"^<!-- (?P<note>.+?) -->$")
_TEST_NOTE = "docs-test: "


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    path: Path
    line: int  # of the opening fence, counted from 1
    language: str
    text: str
    notes: tuple[str, ...]
    output: str | None = None  # the text block shown as this block's output

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    @property
    def test_note(self) -> str | None:
        """What the block says about its test (`covered by ...`, `collect only ...`, `not run: ...`)."""
        notes = [note.removeprefix(_TEST_NOTE) for note in self.notes if note.startswith(_TEST_NOTE)]
        assert len(notes) <= 1, f"{self.where}: more than one docs-test note"
        return notes[0] if notes else None


def pages() -> list[Path]:
    """README.md, then every page of docs/ by name."""
    return [README, *sorted(DOCS_DIR.glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page in order; each bash block carries the output shown after it."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = previous_end = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        notes: list[str] = []
        above = index - 1
        while above >= 0 and (note := _NOTE.match(lines[above])):
            notes.insert(0, note["note"])
            above -= 1
        end = index + 1
        while end < len(lines) and lines[end] != "```":
            end += 1
        assert end < len(lines), f"{path.relative_to(REPO_ROOT)}:{index + 1}: a fence is never closed"
        block = Block(path, index + 1, fence["language"], "\n".join(lines[index + 1 : end]), tuple(notes))
        previous = found[-1] if found else None
        if (block.language == "text" and previous is not None and previous.language == "bash" and not notes
                and previous.output is None and not "".join(lines[previous_end + 1 : index]).strip()):  # fmt: skip
            found[-1] = Block(previous.path, previous.line, previous.language, previous.text, previous.notes,
                              block.text)  # fmt: skip
        else:
            found.append(block)
        index, previous_end = end + 1, end
    return found


def quickstart_block(marker: str) -> str:
    """The shell lines of the README's block right under `<!-- quickstart:marker -->`."""
    matching = [block for block in blocks(README) if block.notes and block.notes[-1] == f"quickstart:{marker}"]
    assert len(matching) == 1 and matching[0].language == "bash", f"README has no quickstart:{marker} bash block"
    return matching[0].text


def matches_output(shown: str, printed: str) -> bool:
    """Whether `printed` is the output a page shows: `...` stands for any text (a line of its own,
    for any number of lines), the rest is equal (trailing spaces and blank lines aside)."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip()]

    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else ".*?".join(map(re.escape, line.split("..."))) + r"\n"
        for line in lines(shown)
    )
    return re.fullmatch(pattern, "".join(f"{line}\n" for line in lines(printed)), re.S) is not None


def virtual_environment() -> Path | None:
    """The virtual environment the pages' `.venv` stands for: the checkout's, else this run's."""
    for candidate in (REPO_ROOT / ".venv", Path(sys.prefix)):
        if (candidate / "bin" / "activate").exists():
            return candidate
    return None


def copy_checkout(target: Path) -> Path:
    """A copy of the repository whose `.venv` is the run's virtual environment, to run the pages'
    commands in as in the checkout (what they write stays in the copy)."""
    venv = virtual_environment()
    assert venv is not None, "no virtual environment to stand for the checkout's .venv"
    copy_repository(target)
    (target / ".venv").symlink_to(venv, target_is_directory=True)
    return target


def fresh_environment(**settings: str) -> dict[str, str]:
    """This process's environment without any Tessera setting (the service's declared ones, the
    command line's, the test run's) and with the virtual environment's commands first on PATH, as
    in a terminal where it is active; then `settings`."""
    from app.settings import declared_settings

    dropped = {setting.name for setting in declared_settings()} | {"DIRECT_DATABASE_URL", "DIRECT_REDIS_URL",
                                                                   "XDG_CONFIG_HOME"}  # fmt: skip
    env = {name: value for name, value in os.environ.items() if name not in dropped and not name.startswith("TESSERA_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(settings)
    return env


def run_shell(script: str, *, cwd: Path, env: dict[str, str], stdin: str = "", timeout: float = 180):
    """`script` run by `bash -e -o pipefail`, as a page's reader runs its lines; the completed process."""
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout, env=env)  # fmt: skip
