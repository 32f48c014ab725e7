"""Dataroom extraction: hostile archives are refused naming the entry, and nothing lands outside the run."""

from __future__ import annotations

import os
import stat
import zipfile

import pytest

from searchbox.config import DataroomLimits
from searchbox.corpus.dataroom import chunk_text, source_identity, list_files, make_writable, open_workspace
from searchbox.errors import DataroomError
from tests.fakes.deep import deep_tree


def _zip(path, entries):
    """entries: (name, data, mode or None)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode is not None:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


def _snapshot(root):
    return {p for p in root.rglob("*")}


HOSTILE = {
    "traversal": ([("ok.txt", b"fine", None), ("../../evil.txt", b"x", None)], "../../evil.txt", "path traversal"),
    "absolute": ([("/tmp/abs-evil.txt", b"x", None)], "/tmp/abs-evil.txt", "absolute path"),
    "symlink": ([("link", b"/etc/passwd", stat.S_IFLNK | 0o777)], "link", "symbolic link"),
    "fifo": ([("pipe", b"", stat.S_IFIFO | 0o644)], "pipe", "special file"),
    "bomb": ([("bomb.txt", b"\0" * (8 << 20), None)], "bomb.txt", "compression ratio"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_zips_refused_naming_entry(tmp_path, kind):
    entries, entry, why = HOSTILE[kind]
    archive = _zip(tmp_path / f"{kind}.zip", entries)
    run_dir = tmp_path / "run"
    outside_before = _snapshot(tmp_path) - _snapshot(run_dir) if run_dir.exists() else _snapshot(tmp_path)
    with pytest.raises(DataroomError) as err:
        open_workspace(run_dir, archive)
    assert entry in str(err.value) and why in str(err.value)
    assert not (run_dir / "work" / "dataroom").exists()
    after = {p for p in tmp_path.rglob("*") if run_dir not in p.parents and p != run_dir}
    assert after == outside_before
    assert not (tmp_path.parent / "evil.txt").exists() and not os.path.exists("/tmp/abs-evil.txt")


def test_file_count_and_size_caps(tmp_path):
    many = _zip(tmp_path / "many.zip", [(f"f{i}.txt", b"x", None) for i in range(12)])
    with pytest.raises(DataroomError, match="max_files"):
        open_workspace(tmp_path / "r1", many, DataroomLimits(max_files=10))
    big = _zip(tmp_path / "big.zip", [("a.txt", os.urandom(5000), None), ("b.txt", os.urandom(5000), None)])
    with pytest.raises(DataroomError, match="max_bytes"):
        open_workspace(tmp_path / "r2", big, DataroomLimits(max_bytes=8000))


def test_lying_header_is_caught_while_extracting(tmp_path):
    """An entry whose declared size is small but which inflates past the cap is stopped mid-stream."""
    archive = _zip(tmp_path / "lie.zip", [("a.txt", b"A" * 200_000, None)])
    with pytest.raises(DataroomError, match="a.txt"):
        open_workspace(tmp_path / "r", archive, DataroomLimits(max_file_bytes=100_000, max_ratio=1e9))


def test_broken_zip_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(DataroomError):
        open_workspace(tmp_path / "r", bad)
    with pytest.raises(DataroomError, match="not found"):
        open_workspace(tmp_path / "r", tmp_path / "missing.zip")


def test_wrapper_folder_stripped_and_read_only(tmp_path):
    archive = _zip(tmp_path / "c.zip", [("corpus/a.md", b"alpha", None), ("corpus/sub/b.md", b"beta", None)])
    ws = open_workspace(tmp_path / "run", archive)
    assert ws.files == ["a.md", "sub/b.md"]
    assert list_files(ws.dataroom) == ["a.md", "sub/b.md"]
    assert not os.access(ws.dataroom / "a.md", os.W_OK) or os.geteuid() == 0
    assert stat.S_IMODE((ws.dataroom / "a.md").stat().st_mode) == 0o444
    make_writable(ws.run_dir)


def test_non_utf8_names_and_contents(tmp_path):
    archive = tmp_path / "latin.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("caf\xe9.txt")  # cp437 name (no UTF-8 flag)
        zf.writestr(info, b"\xff\xfe caf\xe9 \x80\x81")
        zf.writestr("ok.txt", "plain")
    ws = open_workspace(tmp_path / "run", archive)
    assert len(ws.files) == 2
    assert source_identity(archive) == source_identity(archive)


def test_folder_source_skips_symlinks(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "x.txt").write_text("x")
    (src / "link").symlink_to("/etc/passwd")
    ws = open_workspace(tmp_path / "run", src)
    assert ws.files == ["d/x.txt"]


def test_builtin_dataroom_is_the_default(tmp_path):
    ws = open_workspace(tmp_path / "run", None)
    assert "reports/lighthouses.csv" in ws.files and ws.sha256


def test_chunk_text_windows():
    text = "".join(chr(65 + i % 26) for i in range(3000))
    chunks = chunk_text(text, 1400, 180)
    assert [o for o, _ in chunks] == [0, 1220, 2440]
    assert chunks[0][1][-180:] == chunks[1][1][:180]
    assert "".join(c[1] for c in chunks).startswith(text[:1400])
    assert chunk_text("", 10, 2) == []


@pytest.mark.parametrize("entries, fragment", [
    ([("a", b"file", None), ("a/b.txt", b"child", None)], "a/b.txt"),        # a file where a folder must go
    ([("x" * 300 + ".txt", b"long name", None)], "xxxx"),                    # name longer than the filesystem allows
])
def test_unextractable_entries_are_clear_errors(tmp_path, entries, fragment):
    archive = _zip(tmp_path / "odd.zip", entries)
    with pytest.raises(DataroomError, match=fragment):
        open_workspace(tmp_path / "run", archive)
    assert not (tmp_path / "run" / "work" / "dataroom").exists()


def test_empty_zip_and_non_archive(tmp_path):
    empty = _zip(tmp_path / "empty.zip", [])
    assert open_workspace(tmp_path / "r1", empty).files == []
    pdf = tmp_path / "doc.pdf"
    pdf.write_bytes(b"%PDF-1.4 not a zip")
    with pytest.raises(DataroomError, match="not a zip archive or a folder"):
        open_workspace(tmp_path / "r2", pdf)


@pytest.mark.parametrize("names", [
    ["a.txt", "a.txt"],                               # the same name twice (the second would silently win)
    ["a.txt", "./a.txt"],                             # ./ prefix
    ["docs/a.txt", "docs//a.txt"],                    # doubled slash
    ["README.md", "readme.md"],                       # case variants (one file on case-insensitive disks)
    ["caf\u00e9.md", "cafe\u0301.md"],                # NFC and NFD spellings of one name
    ["top/a.txt", "top/./a.txt", "top/b.txt"],        # equal after the wrapper folder is stripped
    ["x/a.txt", "x\\a.txt"],                          # a Windows separator
])
def test_entries_landing_on_one_path_are_refused(tmp_path, names):
    archive = _zip(tmp_path / "dup.zip", [(n, f"v{i}".encode(), None) for i, n in enumerate(names)])
    with pytest.raises(DataroomError, match="duplicate") as err:
        open_workspace(tmp_path / "run", archive)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run" / "work" / "dataroom").exists()


def test_many_small_entries_are_judged_as_a_whole(tmp_path):
    """300 entries of 1 MiB zeros: each under the per-entry threshold, 300 MiB in all from ~300 KB."""
    archive = _zip(tmp_path / "bombs.zip", [(f"z{i:03d}.bin", b"\0" * (1 << 20), None) for i in range(300)])
    assert archive.stat().st_size < 1 << 20
    with pytest.raises(DataroomError, match="total compression ratio"):
        open_workspace(tmp_path / "run", archive)
    assert not (tmp_path / "run" / "work" / ".dataroom.partial").exists()
    assert not (tmp_path / "run" / "work" / "dataroom").exists()


def _utf8_flag_with_bad_bytes(path):
    """A zip whose entry name has the UTF-8 flag set but bytes that are not UTF-8."""
    _zip(path, [("abc.txt", b"x", None)])
    data = bytearray(path.read_bytes())
    data = data.replace(b"abc.txt", b"\xff\xfe\xfd.txt")
    data[6:8] = (0x800).to_bytes(2, "little")  # local header flags
    central = data.find(b"PK\x01\x02")
    data[central + 8 : central + 10] = (0x800).to_bytes(2, "little")
    path.write_bytes(bytes(data))
    return path


def test_invalid_utf8_name_is_a_one_line_refusal(tmp_path):
    archive = _utf8_flag_with_bad_bytes(tmp_path / "bad.zip")
    for call in (lambda: open_workspace(tmp_path / "run", archive), lambda: source_identity(archive)):
        with pytest.raises(DataroomError, match="not valid UTF-8") as err:
            call()
        assert "\n" not in str(err.value)


def _host_dir(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("keep me")
    os.chmod(host / "secret.txt", 0o600)
    os.chmod(host, 0o700)
    return host


@pytest.mark.parametrize("where", ["work/.dataroom.partial", "work/dataroom", "work"])
def test_reusing_a_run_dir_never_follows_the_models_links(tmp_path, where):
    host = _host_dir(tmp_path)
    run = tmp_path / "run"
    open_workspace(run, None)
    target = run / where
    make_writable(target if target.is_dir() else target.parent)
    if target.is_dir():
        import shutil

        shutil.rmtree(target)
    target.symlink_to(host, target_is_directory=True)
    ws = open_workspace(run, None)
    assert "reports/lighthouses.csv" in ws.files and not ws.dataroom.is_symlink() and not ws.work.is_symlink()
    assert stat.S_IMODE(host.stat().st_mode) == 0o700 and stat.S_IMODE((host / "secret.txt").stat().st_mode) == 0o600
    assert (host / "secret.txt").read_text() == "keep me" and sorted(p.name for p in host.iterdir()) == ["secret.txt"]


def test_make_writable_and_removal_skip_links_inside(tmp_path):
    """Links planted inside work/ (beside or in place of the mount point) are removed on reopen, never followed."""
    host = _host_dir(tmp_path)
    run = tmp_path / "run"
    ws = open_workspace(run, None)
    os.chmod(ws.mount, 0o755)
    os.rmdir(ws.mount)
    ws.mount.mkdir()
    (ws.mount / "out").symlink_to(host, target_is_directory=True)
    (ws.mount / "file-link").symlink_to(host / "secret.txt")
    os.mkfifo(ws.work / ".dataroom.partial")
    ws = open_workspace(run, None)
    assert stat.S_IMODE(host.stat().st_mode) == 0o700 and stat.S_IMODE((host / "secret.txt").stat().st_mode) == 0o600
    assert (host / "secret.txt").read_text() == "keep me"
    assert not os.path.lexists(ws.mount / "file-link") and os.listdir(ws.mount) == []
    assert not (ws.dataroom / "file-link").exists() and "file-link" not in ws.files


def test_a_tree_deeper_than_path_max_can_be_made_writable_listed_and_removed(tmp_path):
    """Issue 20: 30 nested 200-character folders in work/ made --overwrite and every sweep relaunch crash with
    ENAMETOOLONG in dataroom._set_modes; the web app's listing of that run answered 500."""
    from searchbox.corpus import safefs
    from searchbox.corpus.dataroom import remove_tree

    ws = open_workspace(tmp_path / "run", None)
    names = deep_tree(ws.work, 30, 200, mode=0o555)
    assert len("/".join(names)) > 4096
    listing = safefs.list_files(ws.work)
    deep = "/".join(names)
    assert (f"{deep}/bottom.txt", 5) in listing.files and (f"{deep}/bad-\udcff-name.md", 5) in listing.files
    assert not listing.truncated
    assert safefs.list_files(ws.work, max_depth=10).truncated
    make_writable(tmp_path / "run")  # what --overwrite and a sweep relaunch do before rmtree
    open_workspace(tmp_path / "run", None)  # reusing the run dir keeps work/ but replaces the dataroom
    remove_tree(tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_remove_tree_any_depth_with_few_descriptors(tmp_path, monkeypatch):
    """Thousands of levels (shutil.rmtree recurses in Python) and a walk that must reopen ancestors through '..'."""
    from searchbox.corpus import safefs
    from searchbox.corpus.dataroom import remove_tree

    monkeypatch.setattr(safefs, "MAX_OPEN_DIRS", 8)
    root = tmp_path / "tree"
    root.mkdir()
    deep_tree(root, 3000, 1, mode=0o500)
    (root / "side").mkdir()
    (root / "side" / "f").write_text("x")
    (root / "link").symlink_to(tmp_path)  # never followed: tmp_path itself survives
    assert len(safefs.list_files(root).files) == 3
    remove_tree(root)
    assert not root.exists() and tmp_path.exists()


def test_make_read_only_at_depth(tmp_path, monkeypatch):
    from searchbox.corpus import safefs
    from searchbox.corpus.dataroom import make_read_only, remove_tree

    monkeypatch.setattr(safefs, "MAX_OPEN_DIRS", 4)
    root = tmp_path / "room"
    root.mkdir()
    names = deep_tree(root, 12, 100)
    make_read_only(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    modes = []
    try:
        for name in names:
            modes.append(stat.S_IMODE(os.stat(name, dir_fd=fd).st_mode))
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        modes.append(stat.S_IMODE(os.stat("bottom.txt", dir_fd=fd).st_mode))
    finally:
        os.close(fd)
    assert modes == [0o555] * 12 + [0o444]
    make_writable(root)
    remove_tree(root)
