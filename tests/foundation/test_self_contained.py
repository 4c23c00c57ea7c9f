"""The repository stands alone: no file reaches for a `shared/` directory beside or outside it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.environment import REPO_ROOT

# Not part of the repository's own files (a virtual environment, caches, generated state).
_SKIPPED_DIRS = {".git", ".venv", "instance", "__pycache__", ".pytest_cache", ".ruff_cache", "artifacts"}
# The directory's name is kept apart so this guard holds no path to it itself.
_NAME = "shared"
_SHARED_REFERENCES = re.compile(
    rf"""\.\./{_NAME}\b"""  # a path relative to the parent directory
    rf"""|/work/{_NAME}\b"""  # the absolute path of the workspace beside the checkout
    rf"""|/\s*["']{_NAME}["']"""  # Path(...) / "<name>"
    rf"""|["']{_NAME}/"""  # "<name>/vectors/..." as a relative path
    rf"""|join\([^)\n]*["']{_NAME}["']"""  # os.path.join(..., "<name>")
)


def _repository_files() -> list[Path]:
    files = []
    for path in REPO_ROOT.rglob("*"):
        relative = path.relative_to(REPO_ROOT)
        if path.is_file() and not set(relative.parts) & _SKIPPED_DIRS and not relative.parts[0].endswith(".egg-info"):
            files.append(path)
    return files


def test_no_file_refers_to_a_shared_directory_outside_the_repository() -> None:
    files = _repository_files()
    assert REPO_ROOT / "tests" / "conftest.py" in files and REPO_ROOT / "app" / "__init__.py" in files
    this_file = Path(__file__).resolve()
    offenders = []
    for path in files:
        if path.resolve() == this_file:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _SHARED_REFERENCES.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:120]}")
    assert not offenders, "files that read outside the repository:\n" + "\n".join(offenders)
