"""The dataroom: safe extraction of a zip or folder (into the shared store, corpus.store), a run's view of it at
work/dataroom/, listing, chunking."""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

from ..config import DataroomLimits
from ..errors import DataroomError
from ..paths import sha256_file

# The extraction half lives in corpus.extract (below corpus.store, which both use); these are the names callers
# have always imported from here.
from .extract import (  # noqa: F401
    RATIO_MIN_BYTES, SKIP_DIRS, _copy_folder, _entry_parts, _extract_zip, _folder_members, _refuse_collisions,
    _remove_unfollowed, _set_modes, _stream, _wrapper_prefix, _zip_members, builtin_dataroom, content_digest, hint,
    make_read_only, make_writable, open_zip, packaged_corpus, remove_tree, source_identity)

POINTER = "dataroom.json"  # in a run dir: which shared copy its work/dataroom shows


@dataclass(frozen=True)
class Mount:
    """A read-only folder seen in the box at `at` (work/dataroom), bound from `source` (the shared copy).

    As a path it is `at`, so code that only asks where the read-only part of work/ is needs no change; the box
    (tools.sandbox.wrap) binds `source` there."""

    at: Path
    source: Path

    def __fspath__(self) -> str:
        return str(self.at)


@dataclass
class Workspace:
    """A run directory: artifacts at the top, the agent's world under work/.

    work/dataroom/ holds no copy of the corpus: it is an empty, read-only mount point where the box binds the
    shared copy (`shared`, corpus.store), or with harness.sandbox=none a symbolic link to that copy."""

    run_dir: Path
    total_bytes: int = 0
    sha256: str = ""  # content hash of the dataroom (names + bytes)
    source: str = ""
    shared: Optional[Path] = None  # the shared read-only tree (None: a dataroom extracted into work/ itself)
    count: int = 0  # how many files it holds
    copy: Any = field(default=None, repr=False)  # the corpus.store.Copy it shows: its file list is read on demand
    _files: Optional[list] = field(default=None, repr=False)

    @property
    def files(self) -> list[str]:
        """The dataroom's files, relative, sorted: read from the copy's list only when asked (100K rows cost 0.3 s)."""
        if self._files is None:
            self._files = [rel for rel, _, _ in self.copy.files] if self.copy is not None else []
        return self._files

    @files.setter
    def files(self, value: list[str]) -> None:
        self._files = list(value)

    @property
    def sizes(self) -> dict:
        """Relative path -> bytes, from the copy's file list."""
        return {rel: size for rel, size, _ in self.copy.files} if self.copy is not None else {}

    @property
    def work(self) -> Path:
        return self.run_dir / "work"

    @property
    def mount(self) -> Path:
        """Where the dataroom is in the run's world: work/dataroom."""
        return self.work / "dataroom"

    @property
    def dataroom(self) -> Path:
        """Where the harness reads the dataroom on the host: the shared copy (or work/dataroom without one)."""
        return self.shared if self.shared is not None else self.mount

    @property
    def bind(self) -> Path | Mount:
        """What the box binds read-only at dataroom/ (tools.sandbox takes it in its `readonly` list)."""
        return Mount(self.mount, self.shared) if self.shared is not None else self.mount

    @property
    def answer_path(self) -> Path:
        return self.work / "ANSWER.md"

def open_workspace(run_dir: Path, source: Path | str | None, limits: DataroomLimits | None = None, *,
                   link: bool = False) -> Workspace:
    """Create run_dir/work/ and show the dataroom (zip, folder, or the built-in) read-only at work/dataroom.

    The dataroom is the corpus's shared copy (corpus.store.shared_copy: extracted once per content identity);
    work/dataroom is an empty read-only folder the box binds it on, or (link=True, for harness.sandbox=none, where
    commands run on the host) a symbolic link to it.
    """
    from .store import shared_copy

    limits = limits or DataroomLimits()
    copy = shared_copy(source, limits)
    ws = Workspace(run_dir=Path(run_dir), source=copy.source)
    # A reused run dir holds what the model made: remove it without following any link it planted.
    _remove_unfollowed(ws.work, keep_dir=True)
    ws.work.mkdir(parents=True, exist_ok=True)
    place(ws, copy, link)
    _reserve(ws.run_dir)
    return ws


RESERVE = ".reserve"  # in a run dir: room a run stopped by a full disk frees to record its stop (sweep.folder)
RESERVE_BYTES = 256 * 1024


def _reserve(run_dir: Path) -> None:
    """Real blocks the run can give back on a full disk. The run's own copy of the corpus used to be what it freed;
    with the shared copy there is nothing else of its own to spare."""
    import contextlib

    with contextlib.suppress(OSError):  # a disk already full: the run will say so on its first write
        with open(Path(run_dir) / RESERVE, "wb") as fh:
            fh.write(b"\0" * RESERVE_BYTES)


def run_dataroom(run_dir: Path) -> Path:
    """The host folder holding a run's dataroom: the shared copy its pointer names (a run from before shared
    copies: its own work/dataroom)."""
    run_dir = Path(run_dir)
    try:
        path = Path(json.loads((run_dir / POINTER).read_text())["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return run_dir / "work" / "dataroom"
    return path


def place(ws: Workspace, copy, link: bool = False) -> None:
    """Point the workspace at a shared copy (corpus.store.Copy) and make work/dataroom its mount point or link."""
    _remove_unfollowed(ws.mount)
    if link:
        os.symlink(copy.data, ws.mount, target_is_directory=True)
    else:
        ws.mount.mkdir()
        os.chmod(ws.mount, 0o555)
    ws.shared = copy.data
    # Where this run's dataroom is, beside work/ (out of the box's sight): tools, grading and the web app read it.
    from ..paths import atomic_write

    atomic_write(ws.run_dir / POINTER, json.dumps({"identity": copy.identity, "path": str(copy.data)}) + "\n")
    ws.copy, ws._files, ws.count = copy, None, copy.count
    ws.total_bytes = copy.total_bytes
    ws.sha256 = copy.identity


def rescan(ws: Workspace, limits: DataroomLimits) -> None:
    """Recount an extracted dataroom's files, bytes and content identity (after distractors were mixed in)."""
    entries = [(rel, size, sha256_file(path)) for path, rel, size in _folder_members(ws.dataroom, limits)]
    ws.files = sorted(rel for rel, _, _ in entries)
    ws.count = len(entries)
    ws.total_bytes = sum(size for _, size, _ in entries)
    ws.sha256 = content_digest(entries)


def list_files(root: Path) -> list[str]:
    """Regular files under root, relative, sorted; symlinks are not followed."""
    out = []
    for dirpath, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                out.append(path.relative_to(root).as_posix())
    return sorted(out)


def read_text(path: Path) -> str:
    """File contents as text; undecodable bytes become U+FFFD rather than errors."""
    return Path(path).read_bytes().decode("utf-8", errors="replace")


def chunk_text(text: str, size: int = 1400, overlap: int = 180) -> list[tuple[int, str]]:
    """Character windows of `size` with `overlap`: [(offset, text)]; never empty for non-empty text."""
    if not text:
        return []
    step = max(1, size - overlap)
    chunks = []
    for start in range(0, len(text), step):
        chunks.append((start, text[start : start + size]))
        if start + size >= len(text):
            break
    return chunks


def corpus_texts(source: Path, limits: DataroomLimits | None = None) -> dict[str, str]:
    """Every file of a zip or folder as text, keyed as the dataroom will show it (wrapper folder stripped).

    Read through the dataroom's own checks (names, links, sizes, compression ratio, what actually inflates), so a
    zip bomb given to the audit is refused in one line as it would be for a run."""
    source, limits = Path(source), limits or DataroomLimits()
    if source.is_dir():
        raw = {rel: path.read_bytes() for path, rel, _ in _folder_members(source, limits)}
        strip = 0
    elif source.is_file() and zipfile.is_zipfile(source):
        with open_zip(source) as zf:
            raw, counter = {}, [0]
            for info, parts in _zip_members(zf, source, limits):
                sink = io.BytesIO()
                _stream(zf, info, limits, counter, sink)
                raw["/".join(parts)] = sink.getvalue()
        strip = 0  # _zip_members already stripped the wrapper folder
    elif source.exists():
        raise DataroomError(f"{source}: not a zip archive or a folder")
    else:
        raise DataroomError(f"{source}: no such file")
    return {"/".join(PurePosixPath(name).parts[strip:]): data.decode("utf-8", errors="replace") for name, data in sorted(raw.items())}
