"""The repository stands alone: no file reaches for a directory beside or outside it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.environment import REPO_ROOT

# Not part of the repository's own files (a virtual environment, caches, installed or generated state).
_SKIPPED_DIRS = {".git", ".venv", "instance", "__pycache__", ".pytest_cache", ".ruff_cache", "artifacts",
                 "node_modules"}  # fmt: skip
# A relative path that climbs: `../name`, `../../name/...`.
_CLIMBING_PATH = re.compile(r"(?:\.\./)+[\w.-]+")


def _repository_files() -> list[Path]:
    files = []
    for path in REPO_ROOT.rglob("*"):
        relative = path.relative_to(REPO_ROOT)
        if path.is_file() and not set(relative.parts) & _SKIPPED_DIRS and not relative.parts[0].endswith(".egg-info"):
            files.append(path)
    return files


def _outside_references(path: Path, line: str, root: Path = REPO_ROOT) -> list[str]:
    """The paths outside `root` that `line` of `path` names and that exist: climbing relative paths
    (from the file's directory or from `root`, where commands run) and absolute paths to a sibling of
    the checkout. The parent directory is read at run time, so this guard names no directory itself;
    in a copy with nothing beside it nothing outside can be read, and nothing is reported."""
    found = []
    for match in _CLIMBING_PATH.finditer(line):
        for base in (path.parent, root):
            target = (base / match.group()).resolve()
            if not target.is_relative_to(root) and target.exists():
                found.append(match.group())
                break
    sibling = re.compile(re.escape(str(root.parent)) + r"/(?!" + re.escape(root.name) + r"\b)[\w.-]+")
    found += [match.group() for match in sibling.finditer(line) if Path(match.group()).exists()]
    return found


def test_no_file_refers_to_a_directory_outside_the_repository() -> None:
    files = _repository_files()
    assert REPO_ROOT / "tests" / "conftest.py" in files and REPO_ROOT / "app" / "__init__.py" in files
    offenders = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for reference in _outside_references(path, line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {reference}")
    assert not offenders, "files that read outside the repository:\n" + "\n".join(offenders)


def test_the_guard_sees_references_that_leave_the_repository(tmp_path) -> None:
    root, beside = tmp_path / "checkout", tmp_path / "vectors"
    (root / "tests").mkdir(parents=True)
    beside.mkdir()
    inside = root / "tests" / "example.py"
    assert _outside_references(inside, 'open("../../vectors/key.json")', root) == ["../../vectors"]
    assert _outside_references(inside, 'Path("../vectors")', root) == ["../vectors"]  # from where commands run
    assert _outside_references(inside, f'open("{beside}/key.json")', root) == [str(beside)]
    assert _outside_references(inside, 'open("../tests/example.py")', root) == []
    assert _outside_references(inside, 'open("../../elsewhere/x")', root) == []  # nothing there to read
    assert _outside_references(inside, f'open("{root}/app/x.py")', root) == []
