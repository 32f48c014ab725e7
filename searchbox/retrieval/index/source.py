"""What an index reads: the regular files of a folder (or an extracted zip), by relative path, hashed, chunked deterministically."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

from ...corpus import safefs
from ...config import DataroomLimits
from ...corpus.dataroom import SKIP_DIRS, chunk_text, make_writable, open_workspace
from ...errors import DataroomError

if TYPE_CHECKING:
    from .selection import Selection

CHUNKING = "chars-v1"  # dataroom.chunk_text: character windows; a change to it must change this name
BINARY_SNIFF = 8192  # a NUL byte in the first 8 KiB marks a file as binary: listed, never chunked


@dataclass(frozen=True)
class Chunking:
    chars: int = 1400
    overlap: int = 180

    def as_dict(self) -> dict:
        return {"method": CHUNKING, "chunk_chars": self.chars, "chunk_overlap": self.overlap}


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative, POSIX
    size: int
    sha256: str
    data: bytes
    indexed: bool = True  # False for files under .git-style folders: hashed (include_skipped) but never chunked

    @property
    def binary(self) -> bool:
        return b"\x00" in self.data[:BINARY_SNIFF]

    def chunks(self, chunking: Chunking) -> list[tuple[int, str]]:
        """[(character offset, text)]; none for binary files."""
        if self.binary:
            return []
        return chunk_text(self.data.decode("utf-8", errors="replace"), chunking.chars, chunking.overlap)


def content_hash(entries: list[tuple[str, int, str]]) -> str:
    """The dataroom content hash over (path, size, sha256): the same formula as Workspace.sha256."""
    digest = hashlib.sha256()
    for rel, size, file_hash in sorted(entries):
        digest.update(f"{rel}\0{size}\0{file_hash}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def source_kind(path: Path) -> str:
    if path.is_dir():
        return "folder"
    if path.is_file() and zipfile.is_zipfile(path):
        return "zip"
    if not path.exists():
        raise DataroomError(f"index source not found: {path}")
    raise DataroomError(f"{path}: not a zip archive or a folder")


@contextlib.contextmanager
def source_folder(path: Path, limits: DataroomLimits | None = None) -> Iterator[Path]:
    """A folder to read: the folder itself, or a zip's shared copy (extracted once by the dataroom's own checks)."""
    path = Path(path)
    if source_kind(path) == "folder":
        yield path
        return
    from ...corpus.store import shared_copy

    yield shared_copy(path, limits).data  # the runs' own read-only copy: extracted once, never per build


def iter_folder(root: Path, limits: DataroomLimits | None = None, include_skipped: bool = False,
                selection: Optional["Selection"] = None, on_count=None) -> Iterator[SourceFile]:
    """Every regular file under root, sorted by path, with its bytes and SHA-256.

    Links are never followed and files are read through safefs (a run's dataroom is read the way
    the harness reads everything under work/); `.git`-style folders are skipped unless
    include_skipped (a run's content hash covers every file, like Workspace.sha256). A selection (the CLI's
    extension allow-list and skipped folders) leaves the files it does not keep out, or, with include_skipped,
    yields them unindexed. on_count(n) hears how many files will come, before the first (a build's ETA).
    """
    limits = limits or DataroomLimits()
    root = Path(root)
    rels: list[str] = []
    for dirpath, dirs, names in os.walk(root, followlinks=False):
        base = Path(dirpath)
        dirs[:] = [d for d in dirs if stat.S_ISDIR(os.lstat(base / d).st_mode) and (include_skipped or d not in SKIP_DIRS)
                   and (include_skipped or selection is None or not selection.skips_dir(d))]
        for name in names:
            if stat.S_ISREG(os.lstat(base / name).st_mode):
                rel = (base / name).relative_to(root).as_posix()
                if selection is not None and not include_skipped and not selection.keeps(rel):
                    continue
                rels.append(rel)
                if len(rels) > limits.max_files:
                    raise DataroomError(f"refused {root}: more than max_files={limits.max_files} files")
    if on_count is not None:
        on_count(len(rels))
    for rel in sorted(rels):
        indexed = not any(part in SKIP_DIRS for part in rel.split("/")[:-1]) and (selection is None or selection.keeps(rel))
        data = safefs.read_bytes(root, rel, cap=limits.max_file_bytes + 1)
        if data is None:  # vanished or replaced by a link since the walk
            raise DataroomError(f"{root / rel}: changed while it was being indexed")
        if len(data) > limits.max_file_bytes:
            raise DataroomError(f"refused {rel}: exceeds max_file_bytes={limits.max_file_bytes}")
        yield SourceFile(rel, len(data), hashlib.sha256(data).hexdigest(), data, indexed)


def folder_hash(root: Path) -> str:
    """The content hash of a folder over every regular file (reads them all): Workspace.sha256 of a run's dataroom."""
    return content_hash([(f.path, f.size, f.sha256) for f in iter_folder(root, include_skipped=True)])
