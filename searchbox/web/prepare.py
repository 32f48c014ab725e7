"""Preparing a web job: build its dataroom's index before it queues for the model, reporting progress to a file.

A job whose tools search the dataroom (the catalog's high tier) needs the persistent index of that dataroom.
Built inside the run, the first search would hold a model slot for minutes while it embeds; so the web app
asks `index_needed(spec)` at submission (cheap: content hash, embedder identity, a look at the folder), and a
job that needs one is `preparing` while `python -m searchbox.web.prepare` builds it with searchbox.run.index_ready
(exactly as the run would open it), writing `{stage, done, total}` to a progress file through the index
builder's progress hook (searchbox.retrieval.index.progress). The run then finds the index built.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional

from ..config import RunConfig
from ..errors import cli
from ..run import index_ready as ready
from ..paths import atomic_write

WRITE_EVERY_S = 0.5  # progress written at most this often (the first and last embedding reports always)


def run_dataroom(spec: dict) -> Path:
    """The dataroom the job's run will open: its upload, its question set's, or the run's default (the packaged corpus)."""
    from ..corpus.dataroom import packaged_corpus

    given = spec.get("dataroom") or spec.get("set_dataroom")  # an upload, else the question set's own dataroom
    return Path(given) if given else packaged_corpus()


def run_config(spec: dict) -> RunConfig:
    """The parts of the run's config that decide its index (the run starts from the same defaults)."""
    return RunConfig(tools=spec.get("tools"))


def index_folder(spec: dict) -> Optional[Path]:
    """The index folder the job's run will open, or None when its tools search no index (or the index is not persistent)."""
    cfg = run_config(spec)
    return ready.index_folder(cfg, run_dataroom(spec)) if ready.searches_index(cfg) else None


def index_needed(spec: dict) -> Optional[Path]:
    """The folder of an index the job needs and that is not built (or not usable) yet; None when nothing is to build."""
    cfg = run_config(spec)
    if not ready.searches_index(cfg) or ready.found(cfg, run_dataroom(spec)) is not None:
        return None
    return ready.index_folder(cfg, run_dataroom(spec))


def read_progress(path: Path) -> Optional[dict]:
    """What a prepare process last wrote ({stage, done, total, seconds} or, at its end, {finished, ...}); None before."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class ProgressFile:
    """The index builder's progress hook, written (atomically, throttled) where the web app reads it."""

    def __init__(self, path: Path):
        self.path, self.start, self.started, self._last = Path(path), time.monotonic(), time.time(), 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < WRITE_EVERY_S and not (stage == "embed" and done in (0, total)):
            return
        self._last = now
        self.write({"stage": stage, "done": int(done), "total": int(total)})

    def write(self, data: dict) -> None:
        atomic_write(self.path, json.dumps({**data, "seconds": round(time.monotonic() - self.start, 2), "started": round(self.started, 3)}))


def prepare(dataroom: Path, tools: Optional[str], progress: Path) -> dict:
    """Open (building when missing) the index the run of these tools over this dataroom will open; returns what happened."""
    from ..retrieval.index.progress import reporting

    hook = ProgressFile(progress)
    hook.write({"stage": "start", "done": 0, "total": 0})
    with reporting(hook):
        got = ready.ensure(run_config({"tools": tools}), dataroom)
    result = {"finished": True, "built": bool(got and got.built), "chunks": got.chunks if got else 0, "folder": got.folder if got else None}
    hook.write(result)
    return {**result, "seconds": round(time.monotonic() - hook.start, 2)}


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.web.prepare", description="Build a web job's dataroom index.")
    parser.add_argument("--dataroom", type=Path, default=None, help="zip or folder (default: the packaged corpus, as the run)")
    parser.add_argument("--tools", default=None)
    parser.add_argument("--progress", type=Path, required=True, help="JSON file the progress goes to")
    args = parser.parse_args(argv)
    from ..errors import sigterm_as_interrupt
    from ..model.threads import preset_blas_env

    preset_blas_env()
    sigterm_as_interrupt()
    out = prepare(run_dataroom({"dataroom": args.dataroom}), args.tools, args.progress)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
