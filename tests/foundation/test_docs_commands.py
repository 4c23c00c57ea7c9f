"""Every shell command of README.md and docs/*.md runs, as written, and prints what the page shows.

The blocks of each page run in order, as one shell session, in a copy of the checkout, against one
service started from that copy on the embedded default (a fresh instance; jobs run in the web
process); a block another test runs, or that only collects tests, or that no test can run, says so
above it (docs/development.md, "How these pages are tested"), and the claim is checked here.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.agents import LiveServer, claim_key_over_http
from tests.support.bench import free_port, wait_for_url
from tests.support.docs import (
    DOCS_DIR,
    README,
    Block,
    blocks,
    copy_checkout,
    fresh_environment,
    matches_output,
    pages,
    run_shell,
)
from tests.support.environment import REPO_ROOT, USING_POSTGRES, stop_process

LANGUAGES = {"bash", "text", "json", "yaml"}
_COVERED = re.compile(r"covered by (?P<path>[^\s:]+)(?:::(?P<test>\w+))?")
_COLLECT_ONLY = re.compile(r"collect only \(.+\)")
_NOT_RUN = re.compile(r"not run: .+")
# The blocks no test runs, by page and the start of their first line: adding one is a change here.
NOT_RUN = (
    ("docs/development.md", ".ci/run"),  # the CI itself: a fresh .venv, apt-get, both test runs
    ("docs/operations.md", "uv lock --upgrade"),  # rewrites uv.lock from PyPI
    ("docs/credentials.md", "W=/tmp/w3c;"),  # clones the W3C suites from GitHub, needs Node
)
_HERE = Path(__file__).relative_to(REPO_ROOT)
# `pytest` of a collect-only block collects its tests without running them.
_COLLECT_ONLY_SHIM = 'pytest() { command pytest "$@" --collect-only -q; }\n'
# Saves the session (variables, the virtual environment's activation, functions) for the next block.
_SAVE_SESSION = '\n{ export -p | grep -v "^declare -[a-zA-Z]*r"; declare -f; } > "$DOCS_SESSION"\n'


def _where(block: Block) -> str:
    return f"{block.where}\n{block.text}"


def _all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def _runs(block: Block) -> bool:
    note = block.test_note
    return block.language == "bash" and (note is None or _COLLECT_ONLY.fullmatch(note) is not None)


def test_every_block_says_how_it_is_tested():
    not_run = []
    for block in _all_blocks():
        assert block.language in LANGUAGES, f"a block's language is one of {sorted(LANGUAGES)}: {_where(block)}"
        note = block.test_note
        if block.language != "bash":
            assert note is None, f"only bash blocks are run: {_where(block)}"
            continue
        if note is None:
            continue
        if covered := _COVERED.fullmatch(note):
            covering = REPO_ROOT / covered["path"]
            assert covering.is_file(), f"no {covered['path']} covers {_where(block)}"
            if covered["test"]:
                assert f"def {covered['test']}(" in covering.read_text(), f"no {note} for {_where(block)}"
        elif _COLLECT_ONLY.fullmatch(note):
            assert re.search(r"(^|\s)pytest\s", block.text), f"collect only, but no pytest in {_where(block)}"
        else:
            assert _NOT_RUN.fullmatch(note), f"unknown docs-test note {note!r} at {block.where}"
            not_run.append((str(block.path.relative_to(REPO_ROOT)), block.text.splitlines()[0]))
        assert not (block.output and not _runs(block)), f"an output is shown for a block not run here: {block.where}"
    listed = [(page, line) for page, line in not_run if any(page == p and line.startswith(s) for p, s in NOT_RUN)]
    assert listed == not_run and len(not_run) == len(NOT_RUN), f"marked `not run`: {not_run}; listed: {NOT_RUN}"


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_pages_link_to_each_other_and_every_link_resolves():
    for page in pages():
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            assert linked.exists(), f"{page.relative_to(REPO_ROOT)} links to a missing {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.M)
                assert anchor in {_slug(heading) for heading in headings}, f"{page.name}: no #{anchor} in {linked}"
    index = (DOCS_DIR / "README.md").read_text()
    for page in DOCS_DIR.glob("*.md"):
        assert page.name == "README.md" or f"]({page.name})" in index, f"docs/README.md does not list {page.name}"
    assert "](docs/README.md)" in README.read_text()


def test_the_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 160, f"the README has {len(lines)} lines; the rest belongs in docs/"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == [
        "## Two commands",
        "## First sign-in",
        "## First agent",
        "## Your agents on a chain (optional)",
        "## Where to go next",
    ], headings


@dataclass
class Session:
    """Where the pages' commands run: the copy, the service, the environment, the key to paste."""

    checkout: Path
    url: str
    env: dict[str, str]
    key: str
    log: Path


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Iterator[Session]:
    if USING_POSTGRES:
        pytest.skip("the pages run on the embedded default, the same in either run: the SQLite run runs them")
    base = tmp_path_factory.mktemp("docs")
    checkout = copy_checkout(base / "checkout")
    port = free_port()
    url = f"http://localhost:{port}"
    service = {"TESSERA_INSTANCE_DIR": str(checkout / "instance"), "PORT": str(port), "BASE_URL": url,
               "CELERY_ALWAYS_EAGER": "1"}  # fmt: skip
    env = fresh_environment(**service, TESSERA_TESTNET_URL=url, XDG_CONFIG_HOME=str(base / "config"))
    release = [block for block in _all_blocks() if block.test_note == f"covered by {_HERE}::session"]
    assert release, "a page shows the release step, which migrates the fresh instance here"
    for block in release:
        migrated = run_shell(block.text, cwd=checkout, env=env)
        assert migrated.returncode == 0, f"{_where(block)}\n{migrated.stderr}"
    log = base / "service.log"
    web = ["python", "-m", "app.serving", "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1", "--no-ws", "--factory", "app.serving:web_app"]  # fmt: skip
    with open(log, "wb") as output:
        process = subprocess.Popen(web, cwd=checkout, env=fresh_environment(**service, DEV_OUTBOX="1",
                                   LOG_LEVEL="WARNING"), stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    try:
        wait_for_url(f"{url}/readyz", process, timeout=90)
        yield Session(checkout, url, env, claim_key_over_http(LiveServer(url)), log)
    finally:
        stop_process(process)


def _run_page(session: Session, page: Path) -> None:
    state = session.checkout.parent / f"session-{page.stem}.sh"
    state.write_text("")
    env = {**session.env, "DOCS_SESSION": str(state)}
    for block in blocks(page):
        if not _runs(block):
            continue
        shim = _COLLECT_ONLY_SHIM if block.test_note else ""
        script = f'. "$DOCS_SESSION"\nset -a\n{shim}{block.text}{_SAVE_SESSION}'
        done = run_shell(script, cwd=session.checkout, env=env, stdin=session.key + "\n")
        failure = f"{_where(block)}\n--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr[-3000:]}"
        assert done.returncode == 0, f"{failure}\n--- service ---\n{session.log.read_text()[-2000:]}"
        assert session.key not in done.stdout + done.stderr, f"the agent key was printed by {block.where}"
        if block.output is not None:
            assert matches_output(block.output, done.stdout), f"{failure}\n--- shown ---\n{block.output}"


def test_the_commands_of_every_page_run_as_shown(session):
    """The README first: the pages after it may use what it made (the demo user)."""
    for page in pages():
        _run_page(session, page)
