"""Every file a question names (gold_files, evidence_files, evidence[].file) must be in the dataroom.

A gold name resolves as the evidence grader resolves it: the dataroom-relative path, or a path that ends with
"/" + the name; a leading "dataroom/" is dropped. Read before a sweep starts, so a wrong name fails in one line
instead of grading every run as unmeasured.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError


def dataroom_files(dataroom: Path) -> set[str]:
    """The dataroom-relative paths of a folder (links not followed) or a zip (one wrapper folder stripped)."""
    dataroom = Path(dataroom)
    if dataroom.is_dir():
        out = set()
        for root, dirs, files in os.walk(dataroom):
            rel = Path(root).relative_to(dataroom)
            out.update((rel / f).as_posix() if str(rel) != "." else f for f in files)
        return out
    try:
        with zipfile.ZipFile(dataroom) as zf:
            names = [n for n in zf.namelist() if not n.endswith("/")]
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{dataroom}: not a folder or a readable zip ({exc})") from exc
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names):
        names = [n.split("/", 1)[1] for n in names]
    return set(names)


def resolves(name: str, files: set[str], basenames: set[str]) -> bool:
    name = name.strip("/")
    name = name[len("dataroom/"):] if name.startswith("dataroom/") else name
    if name in files:
        return True
    if "/" not in name:
        return name in basenames
    return any(f.endswith("/" + name) for f in files)


def missing(questions: Iterable, dataroom: Path) -> list[tuple[str, str]]:
    """(question id, file name) for every named file the dataroom lacks."""
    files = dataroom_files(dataroom)
    basenames = {f.rsplit("/", 1)[-1] for f in files} | {f"{f.split('/', 1)[1]}" for f in files if f.count("/") == 1}
    out = []
    for q in questions:
        named = [*q.gold_files, *q.evidence_files, *(str(e.get("file") or "") for e in q.evidence)]
        out += [(q.id, n) for n in dict.fromkeys(named) if n and not resolves(n, files, basenames)]
    return out


def require(questions: Iterable, dataroom: Path, qpath: Path | str = "questions") -> None:
    """ConfigError naming the first missing file (and how many more) when any named file is not in the dataroom."""
    gone = missing(questions, dataroom)
    if gone:
        qid, name = gone[0]
        more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
        raise ConfigError(f"{qpath}: question {qid!r} names {name!r}, which is not in the dataroom {dataroom}{more}")
