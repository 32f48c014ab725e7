"""A tiny repository with hand-labelled scout tasks, built in a temp dir for scout and MCP tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CALC = '''"""Tiny calculator."""


def add_numbers(a, b):
    """Add two numbers."""
    return a + b


def multiply_numbers(a, b):
    """Multiply two numbers."""
    result = a * b
    return result


class Accumulator:
    def __init__(self):
        self.total = 0

    def push(self, value):
        self.total += value
        return self.total
'''
NOTES = "Nothing to see here.\nJust notes.\n"

# line ranges checked by eye against CALC above
MULTIPLY = (9, 12)
PUSH = (19, 21)


def make_repo(base: Path) -> tuple[Path, Path]:
    """(repos dir holding tiny/, task file) under base."""
    root = base / "repos" / "tiny"
    root.mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "notes.txt").write_text(NOTES)
    sha = hashlib.sha256(CALC.encode()).hexdigest()
    tasks = {
        "name": "tiny",
        "repositories": {"tiny": {"commit": "none", "url": "file://tiny"}},
        "tasks": [
            {"id": "multiply", "repository": "tiny", "query": "Where are two numbers multiplied?",
             "targets": [{"path": "calc.py", "symbol": "multiply_numbers", "start_line": MULTIPLY[0], "end_line": MULTIPLY[1], "sha256": sha}]},
            {"id": "push", "repository": "tiny", "query": "Where does the Accumulator push a value onto its total?",
             "targets": [{"path": "calc.py", "symbol": "Accumulator.push", "start_line": PUSH[0], "end_line": PUSH[1], "sha256": sha}]},
            {"id": "divide", "repository": "tiny", "query": "Where are numbers divided?",
             "targets": [{"path": "calc.py", "symbol": "add_numbers", "start_line": 4, "end_line": 6, "sha256": sha}]},
        ],
    }
    path = base / "tasks.json"
    path.write_text(json.dumps(tasks, indent=1))
    return base / "repos", path
