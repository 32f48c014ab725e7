"""A run's dataroom index made ready before the run: by `setup` (the packaged corpus), a sweep's job, the run CLI.

A run whose tools search the dataroom (the catalog's high tier) opens the persistent index of that dataroom and
builds it on first use, so without this the first search would hold a model slot for minutes while it embeds.
`ensure(cfg, dataroom)` builds it beforehand exactly as the run would open it: the run's own extraction and
distractors (the same content hash), the same embedder identity and chunking, the same builder, whose progress
reaches every listener of searchbox.retrieval.index.progress (a CLI bar, a sweep's lines, the web app's progress file).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from ..config import RunConfig
from ..errors import SearchboxError


@dataclass
class Ready:
    """What `ensure` found or did."""

    folder: str
    built: bool  # this call built it (False: it was there already)
    chunks: int  # live rows of the index
    embedded_chunks: int  # chunks this call embedded (0 when found; a rebuild reuses the embedding cache's vectors)
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def searches_index(cfg: RunConfig) -> bool:
    """Whether runs of this config open the dataroom's persistent index (a tool of the high tier, index.persistent)."""
    from ..tools import select

    return cfg.index.persistent and any(s.tier == "high" for s in select(cfg.tools))


def index_folder(cfg: RunConfig, dataroom: Path | str) -> Path:
    """The index folder a run of cfg over this dataroom opens (without distractors: their draw changes the content)."""
    from .identity import dataroom_identity
    from ..retrieval.embedder import embedder_identity, identity_key
    from ..retrieval.index.registry import index_key, index_root
    from ..retrieval.index.source import Chunking

    key = identity_key(embedder_identity(cfg.retrieval))
    chunking = Chunking(cfg.retrieval.chunk_chars, cfg.retrieval.chunk_overlap)
    return index_root(cfg.index.root) / index_key(dataroom_identity(dataroom, cfg.limits), key, chunking)


def found(cfg: RunConfig, dataroom: Path | str) -> Optional[Ready]:
    """The index a run would open, when it is built and usable as the run would use it; else None (nothing is built)."""
    from ..retrieval.index.store import Index

    if cfg.noise.ratio > 0:
        return None  # the content hash exists only once the distractors are drawn into an extraction
    start = time.monotonic()
    folder = index_folder(cfg, dataroom)
    try:
        idx = Index.open(folder)
    except (SearchboxError, OSError, ValueError):
        return None
    try:
        if cfg.index.backend == "ann" and not idx.has_ann and idx.live_rows:
            return None
        return Ready(str(folder), False, idx.live_rows, 0, round(time.monotonic() - start, 3))
    finally:
        idx.close()


def ensure(cfg: RunConfig, dataroom: Path | str) -> Optional[Ready]:
    """Open, building when missing, the index runs of cfg over this dataroom (zip or folder) will open; None when
    their tools search no index. The caller shows progress with searchbox.retrieval.index.progress.reporting."""
    from ..corpus.dataroom import make_writable, open_workspace
    from ..retrieval import Retrieval
    from .runner import _add_noise

    if not searches_index(cfg):
        return None
    start = time.monotonic()
    hit = found(cfg, dataroom)
    if hit is not None:
        return hit
    tmp = Path(tempfile.mkdtemp(prefix="sb-index-ready-"))
    try:
        ws = open_workspace(tmp / "run", dataroom, cfg.limits)  # the run's own extraction: the same content hash
        _add_noise(cfg, ws, False)
        retrieval = Retrieval(cfg.retrieval, ws.dataroom, index=cfg.index, content_hash=ws.sha256)
        retrieval.corpus.index.close()  # opening builds it when missing, under the folder's writer lock
        info = retrieval.index_info
    finally:
        make_writable(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    return Ready(str(info["folder"]), bool(info.get("built")), int(info.get("rows") or 0), int(info.get("embedded_chunks") or 0),
                 round(time.monotonic() - start, 3))
