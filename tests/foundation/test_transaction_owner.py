"""One owner of the transaction: outside the database package (`app/db.py`, the unit of work, and
`app/dialect.py`, what differs between the databases) nothing commits, sends BEGIN or COMMIT, or
sets an isolation level; every edge opens a unit of work instead."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATABASE_PACKAGE = {"app/db.py", "app/dialect.py"}
# Files whose owner is rewriting them on another branch; each entry must still offend (see below),
# so it is removed with the rewrite that ends the offence.
HANDED_OVER: dict[str, str] = {}
_TRANSACTION_SQL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|START TRANSACTION|SET\s+(LOCAL\s+)?TRANSACTION)\b", re.I)


def _offences(path: Path) -> list[str]:
    """Where `path` commits, sends transaction control as text, or sets an isolation level."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "commit":
                found.append(f"{line}: .commit()")
            if node.func.attr == "exec_driver_sql":
                found.append(f"{line}: SQL sent past SQLAlchemy (exec_driver_sql)")
        if isinstance(node, ast.keyword) and node.arg == "isolation_level":
            found.append(f"{line}: isolation_level=")
        stored = isinstance(getattr(node, "ctx", None), ast.Store)
        if isinstance(node, ast.Attribute) and node.attr in ("isolation_level", "autocommit") and stored:
            found.append(f"{line}: .{node.attr} set")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == "isolation_level":
                found.append(f"{line}: isolation_level option")
            if _TRANSACTION_SQL.match(node.value) and node.value.split()[0].isupper():
                found.append(f"{line}: transaction control as text {node.value.split()[0]!r}")
    return found


def _sources() -> list[Path]:
    return sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("worker/**/*.py")])


def test_only_the_database_package_controls_transactions():
    offenders = {}
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name in DATABASE_PACKAGE or name in HANDED_OVER:
            continue
        if found := _offences(path):
            offenders[name] = found
    assert offenders == {}


def test_the_database_package_is_where_transactions_are_controlled():
    # The scan finds what it looks for: the owner itself does all of it.
    found = " ".join(offence for name in DATABASE_PACKAGE for offence in _offences(ROOT / name))
    for offence in (".commit()", "isolation_level", "'BEGIN'", "'COMMIT'"):
        assert offence in found


def test_every_file_handed_over_still_offends():
    for name in HANDED_OVER:
        assert _offences(ROOT / name), f"{name} no longer controls transactions: take it off HANDED_OVER"
