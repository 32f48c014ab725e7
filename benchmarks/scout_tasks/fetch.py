"""Fetch the pinned source distributions of a scout task set and unpack one checkout per repository.

    python benchmarks/scout_tasks/fetch.py [TASKS.json] [--dest DIR]

Each repository entry names its sdist (`"sdist": "NAME==VERSION"`) and pins it by hash
(`"commit": "sha256:<hex>"`); pip downloads it with --require-hashes, it is unpacked (tar `data`
filter: no links out, no absolute paths) into DEST/NAME (default $SEARCHBOX_HOME/scout-repos/NAME),
and every target file is checked against its label's SHA-256. Existing checkouts that verify are kept.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from searchbox.errors import SearchboxError
from searchbox.paths import home
from searchbox.scout.tasks import TaskError, TaskSet, load, verify

HERE = Path(__file__).resolve().parent


def fetch_one(name: str, entry: dict, dest: Path) -> None:
    sdist, commit = entry.get("sdist"), entry.get("commit", "")
    if not sdist or not commit.startswith("sha256:"):
        raise TaskError(f"repository {name}: needs \"sdist\": \"NAME==VERSION\" and \"commit\": \"sha256:<hex>\" to be fetched")
    digest = commit.split(":", 1)[1]
    with tempfile.TemporaryDirectory(prefix=f"scout-{name}-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{sdist} --hash=sha256:{digest}\n")
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps", "--require-hashes",
               "-r", str(req), "-d", str(Path(tmp) / "dl")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise TaskError(f"repository {name}: pip download of {sdist} failed: {proc.stderr.strip()[-400:]}")
        archives = sorted((Path(tmp) / "dl").iterdir())
        if len(archives) != 1 or hashlib.sha256(archives[0].read_bytes()).hexdigest() != digest:
            raise TaskError(f"repository {name}: the downloaded sdist does not match sha256:{digest}")
        unpack = Path(tmp) / "unpack"
        with tarfile.open(archives[0]) as tar:
            tar.extractall(unpack, filter="data")
        tops = list(unpack.iterdir())
        src = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpack
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = dest.with_name(f".{dest.name}.partial")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.move(str(src), staging)
        os.replace(staging, dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="?", type=Path, default=HERE / "dev.json")
    parser.add_argument("--dest", type=Path, default=None, help="default: $SEARCHBOX_HOME/scout-repos")
    args = parser.parse_args(argv)
    dest = args.dest or home() / "scout-repos"
    try:
        tasks: TaskSet = load(args.tasks)
        for name, entry in tasks.repositories.items():
            own = tuple(t for t in tasks.tasks if t.repository == name)
            if (dest / name).is_dir():
                try:
                    verify(tasks, dest, own)
                    print(f"{name}: present and verified", file=sys.stderr)
                    continue
                except TaskError as exc:
                    raise TaskError(f"{exc} (remove {dest / name} to fetch it again)") from None
            print(f"{name}: fetching {entry.get('sdist')}", file=sys.stderr)
            fetch_one(name, entry, dest / name)
        verify(tasks, dest)
    except SearchboxError as exc:
        print(f"searchbox: {exc}", file=sys.stderr)
        return 2
    print(f"{len(tasks.tasks)} tasks over {len(tasks.repositories)} repositories verified in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
