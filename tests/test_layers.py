"""The package plan holds: every import (top-level or inside a function) goes down the floors of LAYERS or stays on
its own floor, and no module imports itself back through others (docs/architecture.md draws the same floors)."""

from __future__ import annotations

import ast
from pathlib import Path

import searchbox

PKG = Path(searchbox.__file__).resolve().parent

# Lowest floor first. A module may import its own floor and the floors below, never one above.
LAYERS: list[tuple[str, ...]] = [
    ("searchbox", "searchbox.config", "searchbox.errors", "searchbox.paths", "searchbox.bounds", "searchbox.humanize"),
    ("searchbox.corpus",),
    ("searchbox.record",),
    ("searchbox.retrieval",),
    ("searchbox.tools",),
    ("searchbox.model",),
    ("searchbox.harness",),
    ("searchbox.run",),
    ("searchbox.grading",),
    ("searchbox.questions",),
    ("searchbox.datasets",),
    ("searchbox.sweep",),
    ("searchbox.analysis",),
    ("searchbox.web", "searchbox.scout", "searchbox.mcp"),
    # the faces: `python -m searchbox ...` and the thin command modules kept for their names
    ("searchbox.__main__", "searchbox.index", "searchbox.grade", "searchbox.report", "searchbox.serve", "searchbox.collect",
     "searchbox.power"),
]


def modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def floor(module: str) -> int:
    best, length = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > length:
                best, length = i, len(name)
    return best


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the searchbox modules it imports (a name imported from a package counts as that package, unless
    the name is a module of it)."""
    def known(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    edges: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(known(a.name) for a in node.names if a.name.split(".")[0] == "searchbox")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                if base.split(".")[0] != "searchbox":
                    continue
                for alias in node.names:
                    found.add(known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in mods else known(base))
        edges[mod] = {t for t in found if t and t != mod}
    return edges


def test_every_module_has_a_floor():
    assert [m for m in modules() if floor(m) < 0] == []


def test_no_module_imports_a_floor_above_its_own():
    edges = imports(modules())
    upward = sorted(f"{a} (floor {floor(a)}) imports {b} (floor {floor(b)})" for a, bs in edges.items() for b in bs
                    if floor(b) > floor(a))
    assert upward == []


def test_no_import_cycles():
    edges = imports(modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components, iteratively deep enough for this graph
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    assert cycles == []


def test_a_planted_upward_import_is_caught(tmp_path):
    """The check can fail: config importing the harness (the cycle the plan removed) is named."""
    edges = {"searchbox.config": {"searchbox.harness"}}
    assert [b for a, bs in edges.items() for b in bs if floor(b) > floor(a)] == ["searchbox.harness"]
