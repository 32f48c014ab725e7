"""The persistent index: build/refresh/compact, doctor and refusal of damaged indexes, concurrent builders, parity with in-memory retrieval."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from searchbox.config import IndexConfig, RetrievalConfig
from searchbox.corpus.dataroom import builtin_dataroom, chunk_text, open_workspace
from searchbox.errors import BackendError
from searchbox.retrieval.index.cli import main as cli
from searchbox.retrieval.index.ann import AnnParams
from searchbox.retrieval.index.bench import bench, gold_metrics
from searchbox.retrieval.index.build import build, compact, refresh
from searchbox.retrieval.index.doctor import doctor, healthy
from searchbox.retrieval.index.encoders import record
from searchbox.retrieval.index.source import Chunking
from searchbox.retrieval.index.store import Index, IndexCorrupt
from searchbox.retrieval import Retrieval
from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.corpus import IndexCorpus, rank
from searchbox.retrieval.embedder import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ["How tall is the Gannet Rock tower?", "Who led the restoration?", "visitor numbers in 2023", "fog signal keeper",
           "guidebook price", "Mira Holt"]
CHUNKING = Chunking(300, 60)


class CountingEncoder(CachedEncoder):
    """The hashing embedder, recording every passage it is asked to embed."""

    def __init__(self, dim: int = 64):
        super().__init__(HashEmbedder(dim), None)
        self.passages: list[str] = []

    def encode(self, texts, role="passage"):
        if role == "passage":
            self.passages.extend(texts)
        return super().encode(texts, role)


def _build(src: Path, folder: Path, encoder=None, **kw):
    encoder = encoder or CountingEncoder()
    return build(src, folder, encoder, CHUNKING, record(encoder.embedder.config, encoder.identity), **kw), encoder


def _results(folder: Path, encoder, retriever: str, k: int = 6, use_ann: bool = False) -> dict:
    idx = Index.open(folder)
    corpus = IndexCorpus(idx, use_ann=use_ann)
    out = {q: [(idx.chunk(r).doc_id, round(s, 5)) for r, s in rank(corpus, q, k, retriever, lambda t: encoder.encode([t], "query")[0])]
           for q in QUERIES}
    idx.close()
    return out


@pytest.fixture
def corpus_dir(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(builtin_dataroom(), src)
    (src / "tools").mkdir()
    (src / "tools" / "beam.py").write_text("def beam_range(height_m):\n    \"\"\"Geographic range of a light in nautical miles.\"\"\"\n"
                                           "    return 2.08 * height_m ** 0.5\n")
    return src


def test_build_search_refresh_delta_equals_fresh_build(tmp_path, corpus_dir):
    folder = tmp_path / "ix"
    report, enc = _build(corpus_dir, folder, ann=None)
    assert report.status == "built" and report.files == 8 and report.embedded_chunks == len(enc.passages) > 9
    assert _results(folder, enc, "dense")["How tall is the Gannet Rock tower?"]
    idx = Index.open(folder)  # code is indexed like any text
    assert any(idx.chunk(r).path == "tools/beam.py" for r, _ in idx.bm25_top("beam_range nautical", 3))
    idx.close()

    # Modify one file, add one, delete one.
    (corpus_dir / "people/staff.md").write_text((corpus_dir / "people/staff.md").read_text() + "\nMira Holt joined as fog signal keeper in 2024.\n")
    (corpus_dir / "reports/fog.md").write_text("Fog signal log of the Skerrow Point station. " * 12)
    deleted_text = (corpus_dir / "products/visits.md").read_text()
    (corpus_dir / "products/visits.md").unlink()
    enc.passages.clear()
    rep = refresh(folder, enc, compact=False)
    assert (rep.changed_files, rep.new_files, rep.deleted_files) == (["people/staff.md"], ["reports/fog.md"], ["products/visits.md"])
    expected = [t for p in ("people/staff.md", "reports/fog.md") for _, t in chunk_text((corpus_dir / p).read_text(), CHUNKING.chars, CHUNKING.overlap)]
    assert enc.passages == expected and rep.embedded_chunks == len(expected)  # only the changed and new files were embedded
    idx = Index.open(folder)
    assert len(idx.segments) == 2 and idx.rows > idx.live_rows  # an append-only delta; superseded rows masked
    assert "products/visits.md" not in idx.files
    idx.close()

    fresh = tmp_path / "fresh"
    _build(corpus_dir, fresh, encoder=enc)
    for retriever in ("dense", "bm25", "hybrid"):
        got = _results(folder, enc, retriever, k=50)
        assert got == _results(fresh, enc, retriever, k=50), retriever
        assert not any(doc.startswith("products/visits.md") for hits in got.values() for doc, _ in hits)
    assert _results(folder, enc, "bm25")["Mira Holt"][0][0].startswith("people/staff.md")
    # The deleted file's own words find nothing of it.
    idx = Index.open(folder)
    assert all(idx.chunk(r).path != "products/visits.md" for r, _ in idx.bm25_top(deleted_text[:200], 50))
    idx.close()

    # Compaction rewrites the live rows as one segment, without embedding: the layout of a fresh build.
    enc.passages.clear()
    compact(folder)
    assert enc.passages == []
    a, b = Index.open(folder), Index.open(fresh)
    assert len(a.segments) == 1 and a.rows == a.live_rows == b.rows
    assert np.array_equal(np.asarray(a.segments[0].vectors), np.asarray(b.segments[0].vectors))
    no_seg = lambda files: {p: {k: v for k, v in e.items() if k != "segment"} for p, e in files.items()}  # noqa: E731
    assert no_seg(a.files) == no_seg(b.files)
    assert healthy(doctor(folder))


def test_refresh_unchanged_is_a_no_op_and_other_embedder_is_refused(tmp_path, corpus_dir):
    folder = tmp_path / "ix"
    _, enc = _build(corpus_dir, folder)
    enc.passages.clear()
    rep = refresh(folder, enc)
    assert rep.status == "up to date" and enc.passages == []
    with pytest.raises(BackendError, match="another embedder"):
        refresh(folder, CachedEncoder(HashEmbedder(32), None))


def test_ann_graph_follows_refresh(tmp_path, corpus_dir):
    folder = tmp_path / "ix"
    _, enc = _build(corpus_dir, folder, ann=AnnParams())
    (corpus_dir / "products/visits.md").unlink()
    (corpus_dir / "reports/fog.md").write_text("Fog signal log of the Skerrow Point station. " * 12)
    refresh(folder, enc, compact=False)
    idx = Index.open(folder)
    assert idx.has_ann and idx.state["ann"]["rows"] == idx.live_rows
    for q in QUERIES:
        hits = idx.ann_top(enc.encode([q], "query")[0], idx.live_rows)
        paths = {idx.chunk(r).path for r, _ in hits}
        assert "products/visits.md" not in paths
    # On a corpus this small HNSW finds the exact neighbours (scores differ in the 4th decimal: f16 storage).
    top3 = lambda res: {q: [doc for doc, _ in hits[:3]] for q, hits in res.items()}  # noqa: E731
    assert top3(_results(folder, enc, "dense", use_ann=True)) == top3(_results(folder, enc, "dense"))
    assert healthy(doctor(folder))


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_truncated_vectors_found_by_doctor_and_refused_by_search(tmp_path, corpus_dir, capsys):
    folder = tmp_path / "ix"
    assert _cli(capsys, "build", corpus_dir, "--index", folder, "--embedder", "hash")[0] == 0
    vec = next(folder.glob("s*.vec.npy"))
    with open(vec, "r+b") as fh:
        fh.truncate(vec.stat().st_size - 100)
    findings = doctor(folder)
    assert not healthy(findings)
    bad = [f for f in findings if f.level == "error"]
    assert vec.name in bad[0].what and "truncated" in bad[0].what and "build" in bad[0].fix
    code, out, err = _cli(capsys, "doctor", "--index", folder)
    assert code == 1 and "ERROR" in out and "fix:" in out
    with pytest.raises(IndexCorrupt, match="damaged"):
        Index.open(folder)
    code, out, err = _cli(capsys, "search", "Gannet Rock", "--index", folder)
    assert code == 2 and out == "" and err.startswith("searchbox: index ") and "doctor" in err and len(err.strip().splitlines()) == 1
    # The fix doctor names works.
    assert _cli(capsys, "build", corpus_dir, "--index", folder, "--embedder", "hash", "--force")[0] == 0
    assert healthy(doctor(folder)) and _cli(capsys, "search", "Gannet Rock", "--index", folder)[0] == 0


def test_manifest_disagreeing_with_state_found_and_refused(tmp_path, corpus_dir, capsys):
    folder = tmp_path / "ix"
    _build(corpus_dir, folder)
    man_path = next(folder.glob("s*.man.npy"))
    man = np.load(man_path)
    # Same size, different content: two rows swapped (a manifest from another build, say).
    swapped = man.copy()
    swapped[[0, -1]] = man[[-1, 0]]
    np.save(man_path, swapped)
    assert "does not match its SHA-256" in [f for f in doctor(folder) if f.level == "error"][0].what
    with pytest.raises(IndexCorrupt, match="man.npy"):
        Index.open(folder)
    # Fewer rows than state.json says.
    np.save(man_path, man[:-1])
    assert any(man_path.name in f.what for f in doctor(folder) if f.level == "error")
    code, _, err = _cli(capsys, "search", "Gannet Rock", "--index", folder, "--retriever", "bm25")
    assert code == 2 and "damaged" in err
    # state.json itself naming more rows than the files hold.
    np.save(man_path, man)
    state = json.loads((folder / "state.json").read_text())
    state["live"]["rows"] += 1
    (folder / "state.json").write_text(json.dumps(state))
    assert not healthy(doctor(folder))
    with pytest.raises(IndexCorrupt):
        Index.open(folder)


RACE = r"""
import sys, time, json
from pathlib import Path
from searchbox.retrieval.index.build import build
from searchbox.retrieval.index.encoders import record
from searchbox.retrieval.index.source import Chunking
from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.embedder import HashEmbedder

class Slow(CachedEncoder):
    def encode(self, texts, role="passage"):
        time.sleep(0.3)  # long enough for the other builder to arrive while this one holds the lock
        return super().encode(texts, role)

src, folder, me, go = sys.argv[1:5]
enc = Slow(HashEmbedder(64), None)
Path(folder).parent.joinpath(f"ready-{me}").write_text("")
while not Path(go).exists():
    time.sleep(0.01)
rep = build(Path(src), Path(folder), enc, Chunking(300, 60), record(enc.embedder.config, enc.identity))
print(json.dumps({"status": rep.status, "generation": rep.generation}))
"""


def test_two_processes_building_at_once_end_with_one_valid_index(tmp_path, corpus_dir):
    folder, go = tmp_path / "ix", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", RACE, str(corpus_dir), str(folder), str(i), str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{i}").exists() for i in range(2)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.02)
    go.write_text("")
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(o["status"] for o in outs) == ["built", "up to date"]
    assert healthy(doctor(folder))
    idx = Index.open(folder)
    assert idx.state["generation"] == 1 and len(idx.segments) == 1
    assert not list(folder.glob(".tmp-*"))


def _same_search(a: Retrieval, b: Retrieval, questions: list[str], k: int = 8) -> None:
    for q in questions:
        for retriever in ("dense", "bm25", "hybrid"):
            ra, rb = a.search(q, k, retriever=retriever), b.search(q, k, retriever=retriever)
            assert [(h["path"], h["chunk"], h["score"]) for h in ra["results"]] == [(h["path"], h["chunk"], h["score"]) for h in rb["results"]], (q, retriever)
            assert ra["scope_chunks"] == rb["scope_chunks"]


def test_index_equals_in_memory_retrieval_on_builtin_questions(tmp_path):
    """The real MiniLM: the persistent index serves exactly what the in-memory path serves (so recall is equal)."""
    ws = open_workspace(tmp_path / "run", None)
    questions = [json.loads(x) for x in (ROOT / "searchbox/builtin/questions.jsonl").read_text().splitlines() if x.strip()]
    persistent = Retrieval(RetrievalConfig(), ws.dataroom)
    memory = Retrieval(RetrievalConfig(), ws.dataroom, persistent.encoder, index=IndexConfig(persistent=False))
    _same_search(persistent, memory, [q["question"] for q in questions])
    for q in questions:
        assert persistent.answer(q["question"], 3)["results"] == memory.answer(q["question"], 3)["results"]
    scoped = {"paths": ["reports"]}
    assert persistent.search("height", 5, **scoped)["results"] == memory.search("height", 5, **scoped)["results"]
    found = [[h["path"][len("dataroom/"):] for h in persistent.search(q["question"], 5)["results"]] for q in questions]
    assert gold_metrics(found, [q["gold_files"] for q in questions], (5,))["recall@5"] == 1.0
    stats = persistent.stats()
    assert stats["index"]["persistent"] and stats["index"]["built"] and Path(stats["index"]["folder"]).parent == Path(os.environ["SEARCHBOX_HOME"]) / "indexes"


def test_index_equals_in_memory_on_jina(shared_data, tmp_path):
    ws = open_workspace(tmp_path / "run", shared_data / "jina-corpus.zip")
    qs = [json.loads(x)["question"] for x in (shared_data / "jina-qa.jsonl").read_text().splitlines()[:12] if x.strip()]
    enc = CachedEncoder(HashEmbedder(128), None)
    persistent = Retrieval(RetrievalConfig(), ws.dataroom, enc)
    memory = Retrieval(RetrievalConfig(), ws.dataroom, enc, index=IndexConfig(persistent=False))
    _same_search(persistent, memory, qs, k=10)
    assert persistent.stats()["index"]["rows"] == memory.search("x", 1)["scope_chunks"] > 4000


def test_runs_share_the_index_and_setup_is_reported(tmp_path):
    enc = CountingEncoder()
    first = Retrieval(RetrievalConfig(), open_workspace(tmp_path / "a", None).dataroom, enc)
    first.search("Gannet Rock", 3)
    assert first.index_info["built"] and enc.passages and first.timing.setup_s > 0
    enc.passages.clear()
    ws = open_workspace(tmp_path / "b", None)  # another run, another copy of the same dataroom
    second = Retrieval(RetrievalConfig(), ws.dataroom, enc, content_hash=ws.sha256)
    setup0 = second.timing.setup_s
    out = second.search("Gannet Rock", 3)
    assert out["results"][0]["path"] == "dataroom/reports/gannet-rock-survey.md"
    assert not second.index_info["built"] and enc.passages == [] and second.index_info["folder"] == first.index_info["folder"]
    assert second.timing.setup_s > setup0
    second.search("lighthouse keepers", 3, paths=["people"], retriever="hybrid")  # first loads of the files table and BM25: setup
    grown = second.timing.setup_s
    for retriever in ("dense", "bm25", "hybrid"):
        assert second.search("keepers", 5, paths=["people"], retriever=retriever)["scope_files"] == 1
        second.search("keepers", 5, retriever=retriever)
    assert second.timing.setup_s == grown  # nothing left to set up: every later call's time is its own


def test_corrupt_run_index_is_rebuilt_and_unwritable_root_is_a_backend_error(tmp_path):
    ws = open_workspace(tmp_path / "run", None)
    enc = CountingEncoder()
    r = Retrieval(RetrievalConfig(), ws.dataroom, enc)
    r.search("Gannet", 2)
    folder = Path(r.index_info["folder"])
    vec = next(folder.glob("s*.vec.npy"))
    vec.write_bytes(vec.read_bytes()[:-64])
    again = Retrieval(RetrievalConfig(), ws.dataroom, enc)
    assert again.search("Gannet", 2)["results"]
    assert "damaged" in again.index_info["rebuilt"] and healthy(doctor(folder))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    broken = Retrieval(RetrievalConfig(), ws.dataroom, enc, index=IndexConfig(root=str(blocker / "indexes")))
    with pytest.raises(BackendError, match="not writable"):
        broken.search("Gannet", 2)


def test_ann_backend_in_runs_keeps_paths_scoping(tmp_path):
    ws = open_workspace(tmp_path / "run", None)
    enc = CountingEncoder()
    exact = Retrieval(RetrievalConfig(), ws.dataroom, enc)
    ann = Retrieval(RetrievalConfig(), ws.dataroom, enc, index=IndexConfig(backend="ann"))
    docs = lambda out: [(h["path"], h["chunk"]) for h in out["results"]]  # noqa: E731 (scores differ in the 4th decimal: f16)
    assert docs(ann.search("Gannet Rock height", 4)) == docs(exact.search("Gannet Rock height", 4))
    assert ann.corpus.use_ann and ann.stats()["index"]["backend"] == "ann"
    scoped = ann.search("Gannet Rock height", 4, paths=["dataroom/people/staff.md"])
    assert {h["path"] for h in scoped["results"]} == {"dataroom/people/staff.md"}


def test_cli_zip_of_text_and_code_json_search_and_bench(tmp_path, corpus_dir, capsys):
    archive = tmp_path / "corpus.zip"
    with zipfile.ZipFile(archive, "w") as zf:  # one wrapper folder, stripped as in a run's dataroom
        for p in sorted(corpus_dir.rglob("*")):
            if p.is_file():
                zf.write(p, f"wrapper/{p.relative_to(corpus_dir).as_posix()}")
    folder = tmp_path / "ix"
    code, out, _ = _cli(capsys, "build", archive, "--index", folder, "--embedder", "hash", "--chunk-chars", 300, "--chunk-overlap", 60)
    assert code == 0 and json.loads(out)["status"] == "built"
    code, out, _ = _cli(capsys, "search", "beam range nautical miles", "--index", folder, "--k", 3, "--json", "--retriever", "hybrid")
    hits = json.loads(out)
    assert code == 0 and len(hits) == 3 and all(set(h) == {"doc_id", "score", "path", "offset", "snippet"} for h in hits)
    assert hits[0]["path"] == "tools/beam.py" and hits[0]["doc_id"] == "tools/beam.py#0"
    code, out, _ = _cli(capsys, "search", "height", "--index", folder, "--json", "--paths", "people")
    assert {h["path"] for h in json.loads(out)} == {"people/staff.md"}
    code, out, _ = _cli(capsys, "refresh", "--index", folder)
    assert code == 0 and json.loads(out)["status"] == "up to date"
    assert _cli(capsys, "search", " ", "--index", folder)[0] == 2
    code, _, err = _cli(capsys, "search", "x", "--index", tmp_path / "nowhere")
    assert code == 2 and "no index" in err
    result = bench(folder, questions=ROOT / "searchbox/builtin/questions.jsonl", k=5,
                   embed=lambda texts: CachedEncoder(HashEmbedder(256), None).encode(texts, "query"))
    assert result["open_ms"]["p50"] > 0 and result["exact_ms"]["search_p50"] >= 0 and "join_p50" in result["exact_ms"]
    assert result["ann"]["recall@5_vs_exact"] >= 0.9  # f16 scores may reorder near-ties at the cut
    assert set(result["gold"]["dense"]) >= {"recall@1", "hit@1", "recall@5", "hit@5", "p50_ms", "p95_ms"}
    assert 0 <= result["gold"]["bm25"]["recall@5"] <= result["gold"]["bm25"]["hit@5"] <= 1


def test_gold_recall_is_not_hit_rate():
    found = [["a.md", "x.md"], ["b.md"]]
    gold = [["a.md", "c.md"], ["b.md"]]
    m = gold_metrics(found, gold, (5,))
    assert m["hit@5"] == 1.0 and m["recall@5"] == 0.75


# ---- readers isolated from writers, corrupt BM25 (issue 20) ------------------------------------------------------------
READER = r"""
import json, random, sys, time
from pathlib import Path
from searchbox.errors import SearchboxError
from searchbox.retrieval.index.store import Index
from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.embedder import HashEmbedder

folder, stop, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
emb = CachedEncoder(HashEmbedder(64), None)
done, failed = 0, []
while done < n and not stop.exists():
    try:
        idx = Index.open(folder)
        time.sleep(random.random() * 0.02)  # a writer may commit and collect in between: the lazy loads come after
        hits = idx.bm25_top("gannet rock tower keeper", 5) + idx.dense_top(emb.encode(["fog signal"], "query")[0], 5)
        texts = [idx.chunk(r).text for r, _ in hits]
        assert idx.files and texts, "no hits"
        idx.close()
    except Exception as exc:  # anything at all is a failed search
        failed.append(f"{type(exc).__name__}: {exc}")
    done += 1
print(json.dumps({"done": done, "failed": failed}))
"""

WRITER = r"""
import sys, time
from pathlib import Path
from searchbox.retrieval.index.build import refresh
from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.embedder import HashEmbedder

folder, src, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
enc = CachedEncoder(HashEmbedder(64), None)
for i in range(rounds):
    (src / f"note-{i % 3}.md").write_text(f"Round {i}: the gannet rock keeper logged fog {i} times.\n" * 5)
    refresh(folder, enc, compact=(i % 2 == 0))  # every other round compacts: all old segments become garbage
print("writer done")
"""


def test_searches_during_refresh_and_compaction_see_one_whole_generation(tmp_path, corpus_dir):
    folder, stop = tmp_path / "ix", tmp_path / "stop"
    _build(corpus_dir, folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(folder), str(stop), "400"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    writer = subprocess.run([sys.executable, "-c", WRITER, str(folder), str(corpus_dir), "12"], capture_output=True, text=True,
                            env=env, timeout=600)
    stop.write_text("")
    results = []
    for p in readers:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert writer.returncode == 0, writer.stderr
    assert sum(r["done"] for r in results) >= 30
    assert [f for r in results for f in r["failed"]] == []
    # Once the readers are gone, the next write collects every generation they held.
    refresh(folder, CachedEncoder(HashEmbedder(64), None), compact=True)
    idx = Index.open(folder)
    assert healthy(doctor(folder))
    names = {p.name for p in folder.iterdir()}
    gen = idx.state["generation"]
    assert {n for n in names if n.startswith("g")} == {f"g{gen:06d}.{s}" for s in ("files.json", "live.npy", "bm25", "pin", "state.json")}
    assert len([n for n in names if n.startswith("s") and n.endswith(".vec.npy")]) == 1
    idx.close()


@pytest.mark.parametrize("damage", ["vocab.index.json", "params.index.json", "data.csc.index.npy", "indices.csc.index.npy"])
def test_corrupt_bm25_is_one_line(tmp_path, corpus_dir, capsys, damage):
    folder = tmp_path / "ix"
    assert _cli(capsys, "build", corpus_dir, "--index", folder, "--embedder", "hash")[0] == 0
    target = next(folder.glob("g*.bm25")) / damage
    target.write_bytes(b"garbage{{{" if damage.endswith(".json") else target.read_bytes()[:40] + b"\xff" * 64)
    assert not healthy(doctor(folder))
    for retriever in ("bm25", "hybrid"):
        code, out, err = _cli(capsys, "search", "Gannet Rock", "--index", folder, "--retriever", retriever)
        assert code == 2 and out == "" and err.startswith("searchbox: index ") and "doctor" in err, err
        assert len(err.strip().splitlines()) == 1
