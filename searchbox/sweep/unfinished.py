"""A sweep never silently loses a question: each job notes its runs that did not finish, the sweep lists them at the end.

A run that ends in an infrastructure stop (model_error, tool_error: a backend outage, a harness bug) is no result
and is redone by the next launch; until then it is missing from the tables. Each job writes, under its launch's
folder (`.launches/<launch id>/`), the runs it owns (`<job>.runs.json`, key -> question) and the ones that did not
finish with their reason (`<job>.unfinished.jsonl`). At the end the sweep lists every run of the launch without a
DONE marker, and exits with EXIT_INCOMPLETE.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable, Optional

from ..paths import atomic_write

EXIT_INCOMPLETE = 3  # the sweep ran, but some of its runs did not finish (a relaunch redoes them)
DETAIL_CHARS = 300
NOT_RUN = "its job ended before this run finished"


def launch_dir(sweep_dir: Path) -> Path:
    """The folder of the sweep directory's current launch (as sweep.Progress names it)."""
    info = Path(sweep_dir) / "sweep.json"
    try:
        launch = json.loads(info.read_text()).get("launch", "single") if info.exists() else "single"
    except (OSError, ValueError):
        launch = "single"
    return Path(sweep_dir) / ".launches" / str(launch)


class JobNotes:
    """What one job of a launch owns and what of it did not finish."""

    def __init__(self, folder: Path, job: int, runs: dict[str, str]):
        self.folder, self.job = Path(folder), job
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self.folder / f"{job}.runs.json", json.dumps(runs))
        self.path = self.folder / f"{job}.unfinished.jsonl"
        atomic_write(self.path, "")  # a job number is this launch's: anything there is an older attempt's

    def note(self, question_id: str, key: str, label: str, stop_reason: str, detail: str) -> None:
        line = {"question_id": question_id, "key": key, "label": label, "stop_reason": stop_reason, "detail": detail[:DETAIL_CHARS]}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


def unfinished(sweep_dir: Path, jobs: Optional[Iterable[int]] = None) -> list[dict]:
    """Every run of the current launch (or of the given jobs) without a DONE marker, with why (last noted reason)."""
    from ..record.done import is_done

    folder, runs_root = launch_dir(sweep_dir), Path(sweep_dir) / "runs"
    wanted = None if jobs is None else {str(j) for j in jobs}
    owned: dict[str, str] = {}
    notes: dict[str, dict] = {}
    for path in sorted(folder.glob("*.runs.json")):
        job = path.name.split(".")[0]
        if wanted is not None and job not in wanted:
            continue
        try:
            owned.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        try:
            lines = (folder / f"{job}.unfinished.jsonl").read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                note = json.loads(line)
                notes[note["key"]] = note
            except (ValueError, KeyError, TypeError):
                continue
    out = []
    for key, question_id in owned.items():
        if is_done(runs_root / key):
            continue
        out.append(notes.get(key) or {"question_id": question_id, "key": key, "label": "", "stop_reason": "not finished",
                                      "detail": NOT_RUN})
    return out


def report(sweep_dir: Path, jobs: Optional[Iterable[int]] = None) -> int:
    """Print the launch's unfinished runs (one line each) and return the exit code: 0, or EXIT_INCOMPLETE."""
    missing = unfinished(sweep_dir, jobs)
    if not missing:
        return 0
    print(f"[sweep] incomplete: {len(missing)} run(s) did not finish and are not in the tables; the same command redoes them:",
          file=sys.stderr, flush=True)
    for m in missing:
        label = f" ({m['label']})" if m.get("label") else ""
        print(f"[sweep]   {m['question_id'] or '?'}{label} run {m['key']}: {m['stop_reason']}: {m['detail']}", file=sys.stderr, flush=True)
    return EXIT_INCOMPLETE
