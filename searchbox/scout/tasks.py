"""Scout task files: their format, validation, and the check that each checkout matches the pinned labels.

    {"name": ..., "repositories": {"NAME": {"commit": ..., "url": ...}},
     "tasks": [{"id", "repository", "query", "targets": [{"path", "symbol", "start_line", "end_line", "sha256"}]}]}

`--repos DIR` holds one checkout per repository name (DIR/NAME). A target file whose SHA-256 does
not match the checkout refuses the whole evaluation before any run: labels are line ranges, and
line ranges of another version mean nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from jsonschema import Draft202012Validator

from ..corpus import safefs
from ..errors import SearchboxError
from .executor import sha256_hex

_STR = {"type": "string", "minLength": 1}
_LINE = {"type": "integer", "minimum": 1}
SCHEMA = {
    "type": "object",
    "required": ["name", "repositories", "tasks"],
    "properties": {
        "name": _STR,
        "repositories": {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "required": ["commit", "url"], "properties": {"commit": _STR, "url": _STR}}},
        "tasks": {"type": "array", "items": {
            "type": "object", "required": ["id", "repository", "query", "targets"],
            "properties": {
                "id": _STR, "repository": _STR, "query": _STR,
                "targets": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["path", "start_line", "end_line", "sha256"],
                    "properties": {"path": _STR, "symbol": {"type": "string"}, "start_line": _LINE, "end_line": _LINE,
                                   "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}},
            }}},
    },
}


class TaskError(SearchboxError):
    """A task file is malformed, or a checkout does not match its pinned labels."""


@dataclass(frozen=True)
class Target:
    path: str
    start_line: int
    end_line: int
    sha256: str
    symbol: str = ""

    def to_dict(self) -> dict:
        return {"path": self.path, "symbol": self.symbol, "start_line": self.start_line, "end_line": self.end_line, "sha256": self.sha256}


@dataclass(frozen=True)
class Task:
    id: str
    repository: str
    query: str
    targets: tuple[Target, ...]

    @property
    def slug(self) -> str:
        """The id as a safe directory name."""
        slug = re.sub(r"[^A-Za-z0-9._-]", "_", self.id)
        return slug if not slug.startswith(".") else "_" + slug


@dataclass(frozen=True)
class TaskSet:
    name: str
    repositories: dict
    tasks: tuple[Task, ...]
    path: str = ""


def load(path: Path | str) -> TaskSet:
    """Read and validate a task file; TaskError names the first problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(f"{path}: no such task file") from None
    except (OSError, ValueError) as exc:
        raise TaskError(f"{path}: not a readable JSON file ({exc})") from None
    error = next(iter(sorted(Draft202012Validator(SCHEMA).iter_errors(data), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".") or "top level"
        raise TaskError(f"{path}: {where}: {error.message}")
    tasks, seen, slugs = [], set(), set()
    for item in data["tasks"]:
        if item["id"] in seen:
            raise TaskError(f"{path}: task id {item['id']!r} appears twice")
        if item["repository"] not in data["repositories"]:
            raise TaskError(f"{path}: task {item['id']}: repository {item['repository']!r} is not listed under repositories")
        targets = []
        for t in item["targets"]:
            if t["end_line"] < t["start_line"]:
                raise TaskError(f"{path}: task {item['id']}: target {t['path']} ends (line {t['end_line']}) before it starts ({t['start_line']})")
            try:
                rel = "/".join(safefs.parts_of(t["path"]))
            except safefs.UnsafePath as exc:
                raise TaskError(f"{path}: task {item['id']}: target path {exc}") from None
            targets.append(Target(rel, t["start_line"], t["end_line"], t["sha256"], t.get("symbol", "")))
        task = Task(item["id"], item["repository"], item["query"], tuple(targets))
        if task.slug in slugs:
            raise TaskError(f"{path}: task id {item['id']!r} collides with another as a directory name")
        seen.add(task.id)
        slugs.add(task.slug)
        tasks.append(task)
    return TaskSet(data["name"], dict(data["repositories"]), tuple(tasks), str(path))


def verify(tasks: TaskSet, repos: Path | str, only: tuple[Task, ...] | None = None) -> None:
    """Refuse (TaskError) unless every target file exists in DIR/NAME with its pinned SHA-256."""
    repos = Path(repos)
    if not repos.is_dir():
        raise TaskError(f"--repos {repos}: not a directory")
    for task in only if only is not None else tasks.tasks:
        root = repos / task.repository
        if not root.is_dir():
            raise TaskError(f"task {task.id}: repository {task.repository!r} not found at {root}")
        for t in task.targets:
            data = safefs.read_bytes(root, t.path, cap=64 * 1024**2)
            if data is None:
                raise TaskError(f"task {task.id}: {task.repository}/{t.path} is missing from the checkout (or not a regular file)")
            found = sha256_hex(data)
            if found != t.sha256:
                raise TaskError(f"task {task.id}: {task.repository}/{t.path} does not match its label "
                                f"(sha256 {found[:16]}... in the checkout, {t.sha256[:16]}... pinned): wrong version checked out")
