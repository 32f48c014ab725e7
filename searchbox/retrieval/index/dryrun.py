"""`index build --dry-run`: read and chunk a source as a build would, count, and embed nothing (ragbox's dry run)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Optional

from ...config import DataroomLimits
from .selection import Selection
from .source import Chunking, content_hash, iter_folder, source_folder, source_kind


def dry_run(source: Path, chunking: Chunking, selection: Optional[Selection] = None, limits: Optional[DataroomLimits] = None) -> dict:
    """What a build of this source would index: files, chunks, characters, by extension; nothing is written."""
    start = time.monotonic()
    source = Path(source).resolve()
    kind = source_kind(source)
    files = chunks = chars = binary = empty = 0
    by_ext: collections.Counter = collections.Counter()
    entries = []
    with source_folder(source, limits) as root:
        for f in iter_folder(root, limits, selection=selection):
            entries.append((f.path, f.size, f.sha256))
            if not f.indexed:
                continue
            files += 1
            pieces = f.chunks(chunking)
            if f.binary:
                binary += 1
            elif not pieces:
                empty += 1
            chunks += len(pieces)
            chars += sum(len(text) for _, text in pieces)
            name = f.path.rsplit("/", 1)[-1]
            by_ext[("." + name.rsplit(".", 1)[1].lower()) if "." in name.lstrip(".") else "(none)"] += len(pieces)
    return {"status": "dry run", "source": str(source), "kind": kind, "files": files, "chunks": chunks, "chunk_chars": chars,
            "binary_files": binary, "empty_files": empty, "chunks_by_extension": dict(sorted(by_ext.items(), key=lambda kv: (-kv[1], kv[0]))),
            "content_sha256": content_hash(entries), "chunking": chunking.as_dict(),
            "selection": selection.as_dict() if selection is not None else None, "embedded_chunks": 0,
            "seconds": round(time.monotonic() - start, 3)}
