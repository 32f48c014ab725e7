"""Issue 37: one read-only copy per corpus content identity, shared by every run; the run dir holds none."""

from __future__ import annotations

import json
import multiprocessing
import os
import zipfile
from pathlib import Path

import pytest

from searchbox.config import DataroomLimits, HarnessConfig
from searchbox.corpus import store
from searchbox.corpus.dataroom import RESERVE_BYTES, open_workspace, packaged_corpus
from searchbox.errors import DataroomError
from searchbox.tools import ToolContext, Toolset, select
from searchbox.tools.sandbox import bwrap_works

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap unavailable (apt-get install bubblewrap)")


def make_zip(path: Path, n: int, text: str = "document {i} about gannets\n") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(n):
            zf.writestr(f"docs/d{i // 100:03d}/doc{i:05d}.md", text.format(i=i))
    return path


def tree_bytes(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def test_runs_share_one_copy_and_hold_none(tmp_path):
    src = make_zip(tmp_path / "c.zip", 300)
    a = open_workspace(tmp_path / "a", src)
    b = open_workspace(tmp_path / "b", src)
    assert a.dataroom == b.dataroom and a.sha256 == b.sha256 and len(a.files) == 300
    copies = [p for p in store.corpora_dir().iterdir() if (p / store.MANIFEST).is_file()]
    assert len(copies) == 1
    for ws in (a, b):
        assert os.listdir(ws.mount) == [] and not ws.mount.is_symlink()
        files, size = tree_bytes(ws.run_dir)
        assert files == 2 and size < 1000 + RESERVE_BYTES  # the pointer to the shared copy, the full-disk reserve
    assert (a.dataroom / "d000" / "doc00007.md").read_text() == "document 7 about gannets\n"  # wrapper folder stripped
    assert not os.access(a.dataroom / "d000" / "doc00007.md", os.W_OK) or os.geteuid() == 0
    assert oct((a.dataroom / "d000").stat().st_mode & 0o777) == "0o555"


def test_the_identity_is_the_content_hash_and_equals_the_pure_one(tmp_path):
    from searchbox.corpus.dataroom import source_identity

    src = make_zip(tmp_path / "c.zip", 20)
    assert store.identity_of(src) == source_identity(src) == open_workspace(tmp_path / "r", src).sha256
    folder = tmp_path / "f"
    (folder / "x").mkdir(parents=True)
    (folder / "x" / "a.md").write_text("alpha\n")
    assert store.identity_of(folder) == source_identity(folder)


def test_a_known_corpus_is_not_read_again(tmp_path, monkeypatch):
    src = make_zip(tmp_path / "c.zip", 50)
    first = store.identity_of(src)
    monkeypatch.setattr(store, "_extract", lambda *a: pytest.fail("re-extracted a corpus whose stamp held"))
    assert store.identity_of(src) == first
    open_workspace(tmp_path / "r", src)


def test_a_changed_corpus_gets_a_new_identity_and_copy(tmp_path):
    src = make_zip(tmp_path / "c.zip", 10)
    old = store.identity_of(src)
    make_zip(src, 10, text="changed {i}\n")
    os.utime(src, ns=(1, 1))  # even with an old mtime: size and inode are in the stamp too
    new = store.identity_of(src)
    assert new != old
    assert (store.corpora_dir() / new / "data" / "d000" / "doc00003.md").read_text() == "changed 3\n"


def test_a_changed_folder_file_is_seen(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.md").write_text("one\n")
    old = store.identity_of(folder)
    (folder / "a.md").write_text("two\n")
    assert store.identity_of(folder) != old


def test_a_killed_extraction_leaves_nothing_used_and_is_redone(tmp_path, monkeypatch):
    src = make_zip(tmp_path / "c.zip", 30)
    stamp = store.stamp_of(src, DataroomLimits())
    from searchbox.corpus import extract

    real = extract._extract_zip

    def dies(src_, dest, limits):
        real(src_, dest, limits)
        raise KeyboardInterrupt  # killed after writing, before the rename

    monkeypatch.setattr(extract, "_extract_zip", dies)
    with pytest.raises(KeyboardInterrupt):
        store.shared_copy(src)
    assert store.known_identity(stamp) is None
    assert not [p for p in store.corpora_dir().iterdir() if (p / store.MANIFEST).is_file()]
    # A harder kill (SIGKILL) leaves the partial folder: the next holder of the lock removes it.
    partial = store.corpora_dir() / f".partial-{stamp}" / "data"
    partial.mkdir(parents=True)
    (partial / "junk").write_text("half")
    monkeypatch.setattr(extract, "_extract_zip", real)
    copy = store.shared_copy(src)
    assert len(copy.files) == 30 and not (store.corpora_dir() / f".partial-{stamp}").exists()


def _open(args):
    home, src, run = args
    os.environ["SEARCHBOX_HOME"] = home
    return open_workspace(Path(run), src).sha256


def test_concurrent_launches_make_one_copy(tmp_path, isolated_home):
    src = make_zip(tmp_path / "c.zip", 2000)
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        ids = pool.map(_open, [(str(isolated_home), str(src), str(tmp_path / f"run{i}")) for i in range(3)])
    assert len(set(ids)) == 1
    assert [p.name for p in store.corpora_dir().iterdir() if not p.name in ("locks", "stamps")] == [ids[0]]


def test_limits_refuse_with_the_limit_and_its_override(tmp_path):
    src = make_zip(tmp_path / "c.zip", 30)
    with pytest.raises(DataroomError, match=r"30 files exceeds max_files=20 \(raise it with limits.max_files=N\)"):
        open_workspace(tmp_path / "r", src, DataroomLimits(max_files=20))
    open_workspace(tmp_path / "r", src, DataroomLimits(max_files=30))
    # A copy made under larger limits still answers to a run's smaller ones.
    with pytest.raises(DataroomError, match="max_files=20"):
        open_workspace(tmp_path / "r", src, DataroomLimits(max_files=20))


def test_list_and_prune(tmp_path):
    src = make_zip(tmp_path / "c.zip", 10)
    ident = store.identity_of(src)
    [c] = store.list_copies()
    assert c["identity"] == ident and c["files"] == 10 and c["bytes"] > 0
    assert store.prune(older_than_s=3600) == []
    assert [r["identity"] for r in store.prune(identity=ident[:12])] == [ident]
    assert store.list_copies() == [] and store.identity_of(src) == ident  # made again on the next use


@needs_bwrap
def test_the_box_sees_the_copy_read_only_and_no_other_corpus(tmp_path):
    src = make_zip(tmp_path / "c.zip", 5)
    other = store.shared_copy(make_zip(tmp_path / "other.zip", 3, "secret {i}\n"))
    ws = open_workspace(tmp_path / "run", src)
    ctx = ToolContext(work=ws.work, harness=HarnessConfig(bash_timeout_s=10), sandbox_mode="bwrap")
    assert ctx.dataroom == ws.dataroom  # found from the run dir's pointer
    ts = Toolset(select("none"), ctx)
    out = ts.call("bash", json.dumps({"command": f"cat dataroom/d000/doc00002.md; touch dataroom/x dataroom/d000/y 2>&1; "
                                                 f"chmod u+w dataroom/d000/doc00002.md 2>&1; echo hi >> dataroom/d000/doc00002.md 2>&1; "
                                                 f"ls {other.data} 2>&1; ls {store.corpora_dir()} 2>&1; echo end"}))
    assert "document 2 about gannets" in out.output and "end" in out.output
    assert "secret" not in out.output and "doc00000.md" not in out.output.split("document 2")[1]
    assert not (ws.dataroom / "x").exists() and not (ws.dataroom / "d000" / "y").exists()
    assert (ws.dataroom / "d000" / "doc00002.md").read_text() == "document 2 about gannets\n"
    found = ts.call("grep", json.dumps({"pattern": "document 3", "path": "dataroom"}))
    assert "dataroom/d000/doc00003.md:1:" in found.output
    listed = ts.call("find", json.dumps({"pattern": "doc0000[34].md"}))
    assert listed.output.splitlines() == ["dataroom/d000/doc00003.md", "dataroom/d000/doc00004.md"]
    assert "dataroom/" in ts.call("ls", json.dumps({"path": "."})).output
    assert "document 4" in ts.call("read", json.dumps({"path": "dataroom/d000/doc00004.md"})).output


def test_sandbox_none_links_the_copy(tmp_path):
    src = make_zip(tmp_path / "c.zip", 3)
    ws = open_workspace(tmp_path / "run", src, link=True)
    assert ws.mount.is_symlink() and os.readlink(ws.mount) == str(ws.dataroom)
    ctx = ToolContext(work=ws.work, harness=HarnessConfig(bash_timeout_s=10), sandbox_mode="none")
    out = Toolset(select("none"), ctx).call("bash", json.dumps({"command": "cat dataroom/d000/doc00001.md"}))
    assert "document 1 about gannets" in out.output


def test_ls_of_a_big_folder_says_what_it_left_out(tmp_path):
    src = make_zip(tmp_path / "c.zip", 1500, "x{i}\n")
    with zipfile.ZipFile(src, "w") as zf:
        for i in range(1500):
            zf.writestr(f"flat/f{i:05d}.md", "x\n")
    ws = open_workspace(tmp_path / "run", src)
    ctx = ToolContext(work=ws.work, harness=HarnessConfig(output_cap_chars=100_000), sandbox_mode="bwrap")
    out = Toolset(select("none"), ctx).call("ls", json.dumps({"path": "dataroom"}))
    assert "[500 more entries not listed" in out.output and out.data["more"] == 500


def test_the_packaged_corpus_costs_a_run_almost_nothing(tmp_path):
    """Issue 37: the packaged 207-document corpus cost 5.9 MB per run."""
    open_workspace(tmp_path / "first", packaged_corpus())
    ws = open_workspace(tmp_path / "second", packaged_corpus())
    assert len(ws.files) >= 200 and tree_bytes(ws.run_dir)[1] < 1000 + RESERVE_BYTES


def test_corpora_command_lists_and_prunes(tmp_path, capsys):
    from searchbox.__main__ import main

    ident = store.identity_of(make_zip(tmp_path / "c.zip", 4))
    assert main(["corpora", "list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["identity"] == ident and row["files"] == 4
    assert main(["corpora", "prune", "--older-than-days", "1"]) == 0 and "nothing to prune" in capsys.readouterr().out
    assert main(["corpora", "prune", "--identity", ident[:10]]) == 0 and "removed" in capsys.readouterr().out
    assert store.list_copies() == []
