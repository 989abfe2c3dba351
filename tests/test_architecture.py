"""The layers of docs/architecture.md, enforced on every import in the code (those
inside functions included): each package imports only packages below it, entry
points do not import each other, SQL and HTTP stay in their layers."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

#: Package -> the packages it may import (besides itself, the standard library and
#: third-party libraries). Read bottom-up: core is below everything, cli on top.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "pqc": {"core"},
    "chains": {"core", "pqc"},
    "scoring": {"core", "pqc", "chains"},
    "storage": {"core", "pqc", "chains", "scoring"},
    "services": {"core", "pqc", "chains", "scoring", "storage"},
    "api": {"core", "pqc", "chains", "scoring", "storage", "services"},
    "pipelines": {"core", "pqc", "chains", "scoring", "storage", "services"},
    "cli": {"core", "pqc", "chains", "scoring", "storage", "services", "api", "pipelines"},
}
#: Third-party modules a package must not import: HTTP serving and orchestration
#: belong to the entry points, SQLite and PostgreSQL drivers to storage.
FORBIDDEN: dict[str, set[str]] = {
    "core": {"sanic", "dagster", "sqlite3", "duckdb", "polars", "psycopg", "psycopg_pool"},
    "pqc": {"sanic", "dagster", "sqlite3", "duckdb", "httpx", "psycopg", "psycopg_pool"},
    "chains": {"sanic", "dagster", "sqlite3", "duckdb", "psycopg", "psycopg_pool"},
    "scoring": {"sanic", "dagster", "sqlite3", "httpx", "psycopg", "psycopg_pool"},
    "storage": {"sanic", "dagster"},
    "services": {"sanic", "dagster", "sqlite3", "psycopg", "psycopg_pool"},
    "api": {"dagster", "sqlite3", "psycopg", "psycopg_pool"},
    "pipelines": {"sanic", "sqlite3", "psycopg", "psycopg_pool"},
    "cli": {"sqlite3", "psycopg", "psycopg_pool"},
}


def _modules(package: str) -> Iterator[Path]:
    yield from sorted((REPO_ROOT / package).rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _violations(package: str) -> list[str]:
    found = []
    for path in _modules(package):
        for line, module in _imports(path):
            top = module.split(".")[0]
            where = f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
            if top in ALLOWED and top != package and top not in ALLOWED[package]:
                found.append(where)
            if top in FORBIDDEN[package]:
                found.append(where)
    return found


@pytest.mark.parametrize("package", list(ALLOWED))
def test_package_imports_only_the_layers_below_it(package):
    assert list(_modules(package)), f"{package} has no modules: the table is out of date"
    assert _violations(package) == []


def test_every_code_package_is_in_the_table():
    packages = {p.parent.name for p in REPO_ROOT.glob("*/__init__.py")} - {"tests", "bench", "fuzz", "client"}
    assert packages == set(ALLOWED)


def test_the_rule_sees_imports_inside_functions(tmp_path, monkeypatch):
    """A lazy import would otherwise hide a cycle: the check must catch it."""
    package = tmp_path / "storage"
    package.mkdir()
    (package / "late.py").write_text("def f():\n    from services.accounts import Principal\n")
    monkeypatch.setattr("tests.test_architecture.REPO_ROOT", tmp_path)
    assert _violations("storage") == ["storage/late.py:2 imports services.accounts"]


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")


def _module_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (``from pkg import sub``
    counts as importing ``pkg.sub`` when that is a module)."""
    names = {_module_name(path) for path in _modules(package)}
    graph: dict[str, set[str]] = {}
    for path in _modules(package):
        name = _module_name(path)
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                subs = {f"{node.module}.{a.name}" for a in node.names} & names
                targets |= subs or {node.module}
        graph[name] = {t for t in targets if t in names and t != name}
    return graph


@pytest.mark.parametrize("package", list(ALLOWED))
def test_no_module_cycles_inside_a_package(package):
    graph = _module_graph(package)
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        for nxt in graph.get(node, ()):
            if nxt in trail:
                cycles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif len(trail) < 12:
                visit(nxt, [*trail, nxt])

    for start in graph:
        visit(start, [start])
    assert cycles == []
