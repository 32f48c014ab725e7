"""When a run folder counts as done: its DONE marker and its record are there and its record parses and validates.

The sweep skips a done run and redoes any other; collect reads only done runs and names the damaged ones (a DONE
marker beside a record that is empty, garbage, of the wrong shape, nested too deep, or a link) in one line each.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import artifacts
from .record import TOOL_SCHEMA, TURN_SCHEMA, RunRecord

DONE = "DONE"  # marker written last, atomically, when a run (and its grading) finished
META = "run_meta.json"
TABLES = (("turns.parquet", TURN_SCHEMA), ("tool_calls.parquet", TOOL_SCHEMA))


@dataclass(frozen=True)
class Damaged:
    """A run folder with a DONE marker that cannot be trusted as a result, and why (one line)."""

    run_dir: Path
    reason: str

    def line(self) -> str:
        return f"{self.run_dir}: damaged run left out ({self.reason})"


def read_record(run_dir: Path) -> RunRecord:
    """run_meta.json, strictly (RunRecord.parse), never through a link; DamagedArtifact names the problem."""
    data = artifacts.read_json(run_dir, META, artifacts.META_CAP)
    try:
        return RunRecord.parse(data)
    except (ValueError, TypeError) as exc:
        raise artifacts.DamagedArtifact(str(exc)) from None


def marked(run_dir: Path) -> bool:
    """A DONE marker is there (a regular file in a plain folder, not a link): the run claims to be finished."""
    return artifacts.exists(run_dir, DONE)


def check(run_dir: Path) -> Optional[str]:
    """None when the run is done and can be trusted; else why not ("not finished" when it has no DONE marker)."""
    if not marked(run_dir):
        return "not finished"
    try:
        read_record(run_dir)
        for name, schema in TABLES:
            if artifacts.exists(run_dir, name) or (Path(run_dir) / name).is_symlink():
                artifacts.read_table(run_dir, name, schema)
    except artifacts.DamagedArtifact as exc:
        return str(exc)
    return None


def is_done(run_dir: Path) -> bool:
    return check(run_dir) is None


def damaged(run_dir: Path) -> Optional[Damaged]:
    """The run as Damaged when it has a DONE marker but cannot be trusted; None when done or simply not finished."""
    if not marked(run_dir):
        return None
    why = check(run_dir)
    return None if why is None else Damaged(Path(run_dir), why)
