"""Labelling aid for scout task files: print a Python symbol's line range and its file's SHA-256.

    python benchmarks/scout_tasks/label.py REPO_DIR PATH QUALNAME   (e.g. src/pkg/mod.py Class.method)

Ranges run from the `def`/`class` line (decorators excluded) to the last line of the body, as
Python's ast reports them. Print the lines and check them by eye before writing a label.
"""

from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path


def symbol_range(source: str, qualname: str) -> tuple[int, int]:
    """(start, end) of the last definition named qualname (the implementation after any @overload stubs)."""
    found = None

    def visit(node, prefix):
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if name == qualname:
                    found = (child.lineno, child.end_lineno)
                visit(child, name + ".")

    visit(ast.parse(source), "")
    if found is None:
        raise SystemExit(f"{qualname}: not defined")
    return found


def main() -> None:
    repo, path, qualname = sys.argv[1:4]
    data = (Path(repo) / path).read_bytes()
    start, end = symbol_range(data.decode(), qualname)
    lines = data.decode().split("\n")
    print(f'"path": "{path}", "symbol": "{qualname}", "start_line": {start}, "end_line": {end}, '
          f'"sha256": "{hashlib.sha256(data).hexdigest()}"')
    for n in range(max(1, start - 1), min(len(lines), end + 1) + 1):
        print(f"{n:5d}{'>' if start <= n <= end else ' '} {lines[n - 1]}")


if __name__ == "__main__":
    main()
