"""The import graph of `app/` and `worker/`: the Celery entry point sits above the application, and
features at the same level depend one way only."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _package_of(module: str) -> str | None:
    """`worker`, `app`, or the top-level part of `app` a module belongs to (`app.jobs`, `app.db`)."""
    parts = module.split(".")
    if parts[0] == "worker":
        return "worker"
    if parts[0] != "app":
        return None
    return "app" if len(parts) == 1 else f"app.{parts[1]}"


def _import_graph() -> dict[str, set[str]]:
    """Which top-level packages each one imports, counting imports inside functions too."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in [*ROOT.glob("app/**/*.py"), *ROOT.glob("worker/**/*.py")]:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        source = _package_of(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported = [node.module]
            else:
                continue
            for name in imported:
                target = _package_of(name)
                if target is not None and target != source:
                    graph[source].add(target)
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        package = todo.pop()
        if package == goal:
            return True
        if package not in seen:
            seen.add(package)
            todo.extend(graph.get(package, ()))
    return False


def test_the_application_never_imports_the_celery_entry_point():
    graph = _import_graph()
    importers = sorted(package for package, imported in graph.items() if "worker" in imported)
    assert importers == []
    assert all(not _reaches(graph, package, "worker") for package in graph if package != "worker")


def test_tasks_live_in_their_features():
    assert sorted(path.name for path in (ROOT / "worker").glob("*.py")) == ["__init__.py"]
    assert (ROOT / "app" / "jobs" / "tasks.py").exists()


def test_users_never_reach_up_into_sign_in():
    graph = _import_graph()
    assert "app.oidc" not in graph["app.users"]
    assert "app.users" in graph["app.oidc"]  # the one direction: sign-in builds on users


def test_the_packages_form_layers():
    """No package reaches back to one that imports it: each import runs down the layers (the
    application factory `app` on top, features below it, shared modules at the bottom)."""
    graph = _import_graph()
    loops = sorted(
        f"{package} -> {target}"
        for package, imported in graph.items()
        for target in imported
        if _reaches(graph, target, package)
    )
    assert loops == []
