"""Index builds at scale (issue 37.5): a full build writes a segment every SEGMENT_ROWS chunks, a build killed
mid-way resumes from the segments it finished, and its progress carries an ETA over the whole build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.corpus import IndexCorpus, rank
from searchbox.retrieval.embedder import HashEmbedder
from searchbox.retrieval.index import build as build_mod
from searchbox.retrieval.index.build import build
from searchbox.retrieval.index.doctor import doctor, healthy
from searchbox.retrieval.index.encoders import record
from searchbox.retrieval.index.source import Chunking
from searchbox.retrieval.index.store import Index

ROOT = Path(__file__).resolve().parents[2]
CHUNKING = Chunking(200, 40)


def make_tree(root: Path, n: int = 60) -> Path:
    words = "tide beam keeper harbour lamp reef gale lens tower signal".split()
    for i in range(n):
        path = root / f"d{i // 20}" / f"f{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(" ".join(words[(i * 7 + j) % len(words)] + str(j % 13) for j in range(90)))  # about 3 chunks
    return root


def encoder():
    return CachedEncoder(HashEmbedder(32), None)


def do_build(src, folder, **kw):
    enc = encoder()
    return build(src, folder, enc, CHUNKING, record(enc.embedder.config, enc.identity), **kw)


KILLER = r"""
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.embedder import HashEmbedder
from searchbox.retrieval.index import build as build_mod
from searchbox.retrieval.index.build import build
from searchbox.retrieval.index.encoders import record
from searchbox.retrieval.index.source import Chunking

build_mod.SEGMENT_ROWS = int(sys.argv[3])
calls = [0]

class Dying(CachedEncoder):
    def encode(self, texts, role="passage"):
        calls[0] += 1
        if calls[0] > 2:  # the third segment's embedding: die as SIGKILL would, no cleanup at all
            os._exit(9)
        return super().encode(texts, role)

enc = Dying(HashEmbedder(32), None)
build(Path(sys.argv[1]), Path(sys.argv[2]), enc, Chunking(200, 40), record(enc.embedder.config, enc.identity))
"""


def test_killed_build_resumes_from_its_finished_segments(tmp_path, monkeypatch):
    src, folder = make_tree(tmp_path / "src"), tmp_path / "ix"
    rows = 50  # SEGMENT_ROWS: each segment is embedded in one encoder call (EMBED_BATCH is 256)
    proc = subprocess.run([sys.executable, "-c", KILLER, str(src), str(folder), str(rows), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    assert not (folder / "state.json").exists()
    staged = list(folder.glob(".tmp-build-*/s*.journal.json"))
    assert len(staged) == 2  # two segments finished before the kill

    monkeypatch.setattr(build_mod, "SEGMENT_ROWS", rows)
    seen = []
    rep = do_build(src, folder, progress=lambda stage, done, total: seen.append((stage, done, total)))
    fresh = do_build(src, tmp_path / "fresh", force=True)
    assert rep.status == "built" and rep.chunks == fresh.chunks
    assert rep.embedded_chunks < fresh.chunks and rep.embedded_chunks >= fresh.chunks - 2 * rows - 10
    assert not list(folder.glob(".tmp-*")) and healthy(doctor(folder))
    idx, ref = Index.open(folder), Index.open(tmp_path / "fresh")
    assert len(idx.segments) == len(ref.segments) > 2
    for q in ("tide beam", "keeper3 lamp", "gale12 reef"):
        for retriever in ("dense", "bm25", "hybrid"):
            a = [idx.path_chunk(r) for r, _ in rank(IndexCorpus(idx), q, 8, retriever, lambda t: encoder().encode([t], "query")[0])]
            b = [ref.path_chunk(r) for r, _ in rank(IndexCorpus(ref), q, 8, retriever, lambda t: encoder().encode([t], "query")[0])]
            assert a == b, (q, retriever)
    # progress: one count over the whole build, never finished early, ending at the whole
    embeds = [(d, t) for s, d, t in seen if s == "embed"]
    assert embeds and embeds[-1][0] == embeds[-1][1] == rep.chunks
    assert all(d < t for d, t in embeds[:-1])


def test_changed_file_after_a_kill_is_embedded_again(tmp_path, monkeypatch):
    src, folder = make_tree(tmp_path / "src"), tmp_path / "ix"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(src), str(folder), "50", str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    (src / "d0" / "f001.md").write_text("a wholly different lighthouse text " * 10)  # a file of the first segment
    monkeypatch.setattr(build_mod, "SEGMENT_ROWS", 50)
    do_build(src, folder)
    idx = Index.open(folder)
    top = rank(IndexCorpus(idx), "wholly different lighthouse", 1, "bm25", None)
    assert idx.path_chunk(top[0][0])[0] == "d0/f001.md"
    assert idx.live_rows == do_build(src, tmp_path / "fresh").chunks and healthy(doctor(folder))


def test_segments_bound_what_a_build_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(build_mod, "SEGMENT_ROWS", 40)
    src = make_tree(tmp_path / "src")
    rep = do_build(src, tmp_path / "ix")
    idx = Index.open(tmp_path / "ix")
    assert len(idx.segments) == -(-rep.chunks // 40) or len(idx.segments) >= rep.chunks // 40
    assert all(s.rows < 40 + 10 for s in idx.segments)
    assert np.isclose(np.linalg.norm(idx.vectors(np.arange(idx.rows)), axis=1), 1).all()
