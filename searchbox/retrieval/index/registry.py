"""The index of a run's dataroom: one folder per (content hash, embedder, chunking) under the index root, built on first use."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Optional

from ...config import stable_hash
from ...errors import BackendError
from ...paths import home
from . import ann as ann_mod
from .build import Encoder, add_ann, build
from .source import Chunking, folder_hash
from .store import FORMAT, Index, IndexCorrupt, IndexMissing

log = logging.getLogger(__name__)


def index_root(root: Optional[str]) -> Path:
    """IndexConfig.root, or $SEARCHBOX_HOME/indexes."""
    return Path(root).expanduser() if root else home() / "indexes"


def index_key(content_sha256: str, embedder_key: str, chunking: Chunking) -> str:
    """Folder name: the dataroom's content hash, then a hash of what turns it into vectors."""
    return f"{content_sha256[:20]}-{stable_hash(FORMAT, embedder_key, chunking.as_dict(), length=12)}"


def open_index(dataroom: Path, embedder_key: str, embedder_record: dict, chunking: Chunking, get_encoder: Callable[[], Encoder], *,
               root: Optional[str] = None, content_hash: Optional[str] = None, ann: bool = False) -> tuple[Index, dict]:
    """Open the index of this dataroom, building it (once, whoever asks first) when missing.

    Concurrent callers block on the folder's writer lock while one builds; the others then find it
    built. A damaged index is a cache entry gone bad: it is rebuilt, and the reason recorded.
    get_encoder is called only to build (it loads the embedder).
    """
    start = time.monotonic()
    digest = content_hash or folder_hash(dataroom)
    base = index_root(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendError(f"index root {base} is not writable: {exc.strerror or exc}") from exc
    folder = base / index_key(digest, embedder_key, chunking)
    info: dict = {"folder": str(folder), "built": False}

    def make() -> None:
        encoder = get_encoder()
        if encoder.identity != embedder_key:
            raise BackendError(f"embedder identity {encoder.identity} differs from the configured {embedder_key}")
        # Not forced: under the lock, build finds an index another process just (re)built up to date.
        report = build(dataroom, folder, encoder, chunking, embedder_record, expected_hash=digest, ann=ann_mod.AnnParams() if ann else None)
        info["built"] = report.status == "built"
        info["embedded_chunks"] = report.embedded_chunks
        info["build_s"] = report.seconds  # the embedder's loading is the caller's setup, outside this

    try:
        idx = Index.open(folder)
    except IndexMissing:
        make()
        idx = Index.open(folder)
    except IndexCorrupt as exc:
        log.warning("index %s: %s; rebuilding", folder, exc)
        info["rebuilt"] = str(exc)
        make()
        idx = Index.open(folder)
    if ann and not idx.has_ann and idx.live_rows:
        idx.close()
        add_ann(folder)
        idx = Index.open(folder)
    info.update(rows=idx.live_rows, generation=idx.state["generation"], open_s=round(time.monotonic() - start, 4))
    return idx, info
