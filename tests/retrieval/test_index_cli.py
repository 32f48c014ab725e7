"""ragbox's index CLI in searchbox (issue 32 part 6): --dry-run, --query-file, bench --breakdown, --top, --snippet-len,
the extension allow-list and skipped folders, and `manifest --json` exporting the chunk records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from searchbox.retrieval.index.cli import main as cli
from searchbox.retrieval.index.store import Index


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    for rel, text in {
        "app/beam.py": "def beam_range(height_m):\n    return 2.08 * height_m ** 0.5\n",
        "app/notes.md": "# Notes\nThe lighthouse keeper logs the beam every night.\n" * 20,
        "app/data.txt": "plain text about tides\n",
        "node_modules/lib/index.js": "module.exports = function beam() {}\n",
        ".venv/lib/site.py": "import beam\n",
        "app/.cache/blob.py": "cached = True\n",
        "app/deep/node_modules/x.js": "x = 1\n",
    }.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def build(capsys, src, folder, *extra):
    code, out, err = run(capsys, "build", src, "--index", folder, "--embedder", "hash", "--hash-dim", 32,
                         "--chunk-chars", 200, "--chunk-overlap", 40, *extra)
    assert code == 0, err
    return json.loads(out)


def test_dry_run_chunks_and_counts_without_embedding_or_writing(tmp_path, tree, capsys):
    folder = tmp_path / "ix"
    code, out, err = run(capsys, "build", tree, "--index", folder, "--model", "no/such-model-anywhere", "--chunk-chars", 200,
                         "--chunk-overlap", 40, "--dry-run")
    plan = json.loads(out)
    assert code == 0 and plan["status"] == "dry run" and plan["embedded_chunks"] == 0 and not folder.exists()
    assert plan["files"] == 3 and plan["chunks"] > 3 and set(plan["chunks_by_extension"]) == {".py", ".md", ".txt"}
    built = build(capsys, tree, folder)
    assert built["chunks"] == plan["chunks"] and built["files"] == plan["files"]


def test_node_modules_and_dot_dirs_skipped_by_default_and_as_options(tmp_path, tree, capsys):
    build(capsys, tree, tmp_path / "default")
    idx = Index.open(tmp_path / "default")
    assert sorted(idx.files) == ["app/beam.py", "app/data.txt", "app/notes.md"]
    assert idx.state["selection"] == {"extensions": None, "skip_dirs": ["node_modules"], "skip_dot_dirs": True}
    idx.close()
    build(capsys, tree, tmp_path / "all", "--skip-dirs", "", "--include-dot-dirs")
    with_all = Index.open(tmp_path / "all")
    assert {"node_modules/lib/index.js", ".venv/lib/site.py", "app/.cache/blob.py", "app/deep/node_modules/x.js"} <= set(with_all.files)
    with_all.close()
    build(capsys, tree, tmp_path / "py", "--extensions", "py,.MD")
    only = Index.open(tmp_path / "py")
    assert sorted(only.files) == ["app/beam.py", "app/notes.md"]
    only.close()
    # the selection is the index's: a refresh reads the same files, and another selection is a new build
    (tree / "app" / "more.txt").write_text("more tides\n")
    (tree / "app" / "more.py").write_text("def more():\n    pass\n")
    code, out, _ = run(capsys, "refresh", "--index", tmp_path / "py", "--list-files")
    assert code == 0 and json.loads(out)["new_files"] == ["app/more.py"]
    assert build(capsys, tree, tmp_path / "py", "--extensions", "py,md")["status"] == "up to date"
    assert build(capsys, tree, tmp_path / "py", "--extensions", "py")["status"] == "built"
    code, _, err = run(capsys, "build", tree, "--index", tmp_path / "bad", "--extensions", ",", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "--extensions" in err


def test_query_file_searches_with_a_raw_f32_vector(tmp_path, tree, capsys):
    folder = tmp_path / "ix"
    build(capsys, tree, folder)
    idx = Index.open(folder)
    row = int(idx.rows_of(["app/beam.py"])[0])
    vec = idx.vectors(np.array([row]))[0].astype("<f4")
    idx.close()
    qfile = tmp_path / "q.f32"
    qfile.write_bytes(vec.tobytes())
    code, out, err = run(capsys, "search", "--query-file", qfile, "--index", folder, "--top", 2, "--json", "--snippet-len", 12)
    hits = json.loads(out)
    assert code == 0 and len(hits) == 2 and hits[0]["path"] == "app/beam.py" and hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert all(len(h["snippet"]) <= 12 for h in hits)
    (tmp_path / "short.f32").write_bytes(vec[:-1].tobytes())
    code, _, err = run(capsys, "search", "--query-file", tmp_path / "short.f32", "--index", folder)
    assert code == 2 and err.count("\n") == 1 and "124 bytes" in err and "32 little-endian float32 values (128 bytes)" in err
    (tmp_path / "nan.f32").write_bytes(np.full(32, np.nan, dtype="<f4").tobytes())
    assert run(capsys, "search", "--query-file", tmp_path / "nan.f32", "--index", folder)[0] == 2
    code, _, err = run(capsys, "search", "--query-file", qfile, "--index", folder, "--retriever", "bm25")
    assert code == 2 and "--retriever dense" in err
    assert run(capsys, "search", "beam", "--query-file", qfile, "--index", folder)[0] == 2
    assert run(capsys, "search", "--query-file", tmp_path / "missing.f32", "--index", folder)[0] == 2


def test_top_and_snippet_len_on_a_text_query(tmp_path, tree, capsys):
    folder = tmp_path / "ix"
    build(capsys, tree, folder)
    code, out, _ = run(capsys, "search", "lighthouse keeper", "--index", folder, "--retriever", "bm25", "--top", 3, "--snippet-len", 20, "--json")
    hits = json.loads(out)
    assert code == 0 and len(hits) == 3 and all(len(h["snippet"]) <= 20 for h in hits)


def test_manifest_json_exports_every_live_chunk_record(tmp_path, tree, capsys):
    folder = tmp_path / "ix"
    build(capsys, tree, folder)
    code, out, _ = run(capsys, "manifest", "--index", folder, "--json")
    records = json.loads(out)
    assert code == 0 and all(set(r) == {"doc_id", "path", "offset", "length", "text"} for r in records)
    idx = Index.open(folder)
    assert len(records) == idx.live_rows
    idx.close()
    notes = [r for r in records if r["path"] == "app/notes.md"]
    source = (tree / "app" / "notes.md").read_text()
    assert notes[0]["doc_id"] == "app/notes.md#0" and all(source[r["offset"]:r["offset"] + r["length"]] == r["text"] for r in notes)
    code, lines, _ = run(capsys, "manifest", "--index", folder)
    assert [json.loads(line) for line in lines.splitlines()] == records
    # a refresh supersedes the old rows of a changed file: the export lists only live ones
    (tree / "app" / "data.txt").write_text("changed tides\n")
    run(capsys, "refresh", "--index", folder, "--no-compact")
    after = json.loads(run(capsys, "manifest", "--index", folder, "--json")[1])
    assert [r["text"] for r in after if r["path"] == "app/data.txt"] == ["changed tides\n"]


def test_bench_breakdown_reports_manifest_load_search_join_snippet(tmp_path, tree, capsys):
    folder = tmp_path / "ix"
    build(capsys, tree, folder)
    code, out, _ = run(capsys, "bench", "--index", folder, "--queries", 5, "--k", 3, "--breakdown", "--json")
    result = json.loads(out)
    assert code == 0 and set(result["breakdown_ms"]) == {"manifest_load", "search", "join", "snippet", "note"}
    assert all(result["breakdown_ms"][s]["p50"] > 0 for s in ("manifest_load", "search", "join", "snippet"))
    code, text, _ = run(capsys, "bench", "--index", folder, "--queries", 5, "--k", 3, "--breakdown")
    assert code == 0 and "| manifest load |" in text and "| snippet |" in text
    assert "breakdown_ms" not in json.loads(run(capsys, "bench", "--index", folder, "--queries", 5, "--json")[1])


def test_backend_auto_chooses_ann_from_the_stated_threshold(tmp_path, tree, capsys, monkeypatch):
    """Issue 37.5: the default build adds ANN where exact search would be slow (build.ANN_AUTO_ROWS chunks), and a
    default search then uses it; below the threshold the index stays exact."""
    from searchbox.retrieval.index import build as build_mod

    small = build(capsys, tree, tmp_path / "small")
    assert small["chunks"] < build_mod.ANN_AUTO_ROWS and not Index.open(tmp_path / "small").has_ann
    monkeypatch.setattr(build_mod, "ANN_AUTO_ROWS", small["chunks"])
    build(capsys, tree, tmp_path / "big")
    assert Index.open(tmp_path / "big").has_ann
    again = build(capsys, tree, tmp_path / "small")  # the exact index is now under-built: auto rebuilds it with ANN
    assert again["status"] == "built" and Index.open(tmp_path / "small").has_ann
    assert build(capsys, tree, tmp_path / "big")["status"] == "up to date"
    assert build(capsys, tree, tmp_path / "exact", "--backend", "exact") and not Index.open(tmp_path / "exact").has_ann
    code, out, err = run(capsys, "search", "lighthouse beam", "--index", tmp_path / "big", "--json")
    assert code == 0 and json.loads(out)
    import searchbox.retrieval.corpus as corpus_mod

    used = []
    real = corpus_mod.IndexCorpus.__init__
    monkeypatch.setattr(corpus_mod.IndexCorpus, "__init__", lambda self, idx, use_ann=False, on_setup=None: (used.append(use_ann), real(self, idx, use_ann, on_setup))[1])
    run(capsys, "search", "lighthouse beam", "--index", tmp_path / "big")
    run(capsys, "search", "lighthouse beam", "--index", tmp_path / "exact")
    assert used == [True, False]
