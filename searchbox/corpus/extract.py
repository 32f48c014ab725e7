"""Safe extraction of a zip or folder (every refusal: traversal, links, special files, bombs, limits), the
content identity, and the read-only modes: the low half of the dataroom, shared by corpus.store and corpus.noise."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import unicodedata
import zipfile
from importlib import resources
from pathlib import Path, PurePosixPath

from . import safefs
from ..config import DataroomLimits
from ..errors import DataroomError
from ..paths import sha256_file

RATIO_MIN_BYTES = 1 << 20  # tiny files compress absurdly well; only judge ratios above this size
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__"}


def builtin_dataroom() -> Path:
    """The tiny dataroom that ships with the package (7 files): the API's default, for tests and smoke runs."""
    return Path(str(resources.files("searchbox") / "builtin" / "dataroom"))


def packaged_corpus() -> Path:
    """The seed's default corpus, shipped in the package: 207 Jina AI posts and model cards (MIT, see its NOTICE)."""
    return Path(str(resources.files("searchbox") / "builtin" / "jina-corpus.zip"))


def content_digest(entries) -> str:
    """The dataroom's content identity: sorted (relative path, size, SHA-256) of every file it holds."""
    digest = hashlib.sha256()
    for rel, size, file_hash in sorted(entries):
        digest.update(f"{rel}\0{size}\0{file_hash}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def source_identity(source: Path | str | None, limits: DataroomLimits | None = None) -> str:
    """The content identity a run would see, read from a zip or folder without writing anything.

    The same refusals and caps as extraction apply (a hostile archive is refused, not hashed), so
    it equals `open_workspace(...).sha256` for every source that can be opened.
    """
    limits = limits or DataroomLimits()
    src = Path(source) if source else builtin_dataroom()
    if src.is_dir():
        entries = [(rel, size, sha256_file(path)) for path, rel, size in _folder_members(src, limits)]
    elif src.exists() and zipfile.is_zipfile(src):
        with open_zip(src) as zf:
            counter = [0]
            entries = [("/".join(rel), *_stream(zf, info, limits, counter)) for info, rel in _zip_members(zf, src, limits)]
    else:
        raise DataroomError(f"dataroom not found: {src}" if not src.exists() else f"{src}: not a zip archive or a folder")
    return content_digest(entries)


def hint(limit: str) -> str:
    """How to raise a limit, for a refusal's one line."""
    return f" (raise it with limits.{limit}=N)"


def open_zip(src: Path) -> zipfile.ZipFile:
    """The archive, or a one-line DataroomError for anything its directory cannot be read for (names included)."""
    try:
        return zipfile.ZipFile(src)
    except UnicodeDecodeError as exc:  # the UTF-8 flag set on a name that is not UTF-8
        raise DataroomError(f"{src}: broken zip (an entry name is not valid UTF-8: {exc.object[:60]!r})") from exc
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise DataroomError(f"{src}: broken zip ({exc})") from exc


def _entry_parts(name: str) -> tuple[str, ...]:
    """Split an archive name into safe parts, or raise naming the entry."""
    if "\x00" in name:
        raise DataroomError(f"refused entry {name!r}: NUL byte in name")
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise DataroomError(f"refused entry {name!r}: absolute path")
    parts = tuple(p for p in PurePosixPath(norm).parts if p not in ("", "."))
    if ".." in parts:
        raise DataroomError(f"refused entry {name!r}: path traversal")
    return parts


def _zip_members(zf: zipfile.ZipFile, src: Path, limits: DataroomLimits) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """The archive's files with the path each lands on, after every check that needs no decompression."""
    infos = zf.infolist()
    files: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
    declared = packed = 0
    for info in infos:
        parts = _entry_parts(info.filename)
        # Unix mode bits live in the high word; only their file-type part matters here.
        ftype = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
        if ftype == stat.S_IFLNK:
            raise DataroomError(f"refused entry {info.filename!r}: symbolic link")
        if ftype and ftype not in (stat.S_IFREG, stat.S_IFDIR):
            raise DataroomError(f"refused entry {info.filename!r}: special file")
        if info.is_dir() or not parts:
            continue
        if info.file_size > limits.max_file_bytes:
            raise DataroomError(f"refused entry {info.filename!r}: {info.file_size} bytes exceeds max_file_bytes={limits.max_file_bytes}{hint('max_file_bytes')}")
        if info.file_size > RATIO_MIN_BYTES and info.file_size / max(info.compress_size, 1) > limits.max_ratio:
            raise DataroomError(f"refused entry {info.filename!r}: compression ratio above {limits.max_ratio:g} (zip bomb?)")
        declared += info.file_size
        packed += info.compress_size
        files.append((info, parts))
    if len(files) > limits.max_files:
        raise DataroomError(f"refused {src.name}: {len(files)} files exceeds max_files={limits.max_files}{hint('max_files')}")
    if declared > limits.max_bytes:
        raise DataroomError(f"refused {src.name}: {declared} bytes exceeds max_bytes={limits.max_bytes}{hint('max_bytes')}")
    # Many small entries each under RATIO_MIN_BYTES add up: judge the archive as a whole too.
    if declared > RATIO_MIN_BYTES and declared / max(packed, 1) > limits.max_ratio:
        raise DataroomError(f"refused {src.name}: {declared} bytes from {packed} compressed, "
                            f"total compression ratio above {limits.max_ratio:g} (zip bomb?)")
    strip = _wrapper_prefix([p for _, p in files])
    _refuse_collisions([(info.filename, parts[strip:]) for info, parts in files])
    return [(info, parts[strip:]) for info, parts in files]


def _stream(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limits: DataroomLimits, counter: list[int], sink=None) -> tuple[int, str]:
    """(size, SHA-256) of one entry as it inflates, written to `sink` if given; declared sizes can lie, so
    what actually comes out is counted against the caps (counter[0] runs over the whole archive)."""
    digest, size = hashlib.sha256(), 0
    try:
        with zf.open(info) as fh:
            while chunk := fh.read(1 << 16):
                size += len(chunk)
                counter[0] += len(chunk)
                if size > limits.max_file_bytes or counter[0] > limits.max_bytes:
                    raise DataroomError(f"refused entry {info.filename!r}: expands past the size caps (zip bomb?)")
                digest.update(chunk)
                if sink is not None:
                    sink.write(chunk)
    except DataroomError:
        raise
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError) as exc:
        raise DataroomError(f"refused entry {info.filename!r}: cannot extract ({exc})") from exc
    return size, digest.hexdigest()


def _extract_zip(src: Path, dest: Path, limits: DataroomLimits) -> list[tuple[str, int, str]]:
    with open_zip(src) as zf:
        entries, counter = [], [0]
        for info, rel_parts in _zip_members(zf, src, limits):
            target = dest.joinpath(*rel_parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    size, sha = _stream(zf, info, limits, counter, out)
            except OSError as exc:
                raise DataroomError(f"refused entry {info.filename!r}: cannot extract ({exc})") from exc
            entries.append(("/".join(rel_parts), size, sha))
        return entries


def _refuse_collisions(named: list[tuple[str, tuple[str, ...]]]) -> None:
    """Refuse two entries that land on one path (after `./`, wrapper, case and Unicode normalisation),
    and a file entry that is also another entry's folder."""
    def key(parts: tuple[str, ...]) -> str:
        return unicodedata.normalize("NFC", "/".join(parts)).casefold()

    files = {}
    for name, parts in named:
        k = key(parts)
        if k in files:
            raise DataroomError(f"refused entry {name!r}: duplicate of entry {files[k]!r} (same path once extracted)")
        files[k] = name
    for name, parts in named:
        for i in range(1, len(parts)):
            if key(parts[:i]) in files:
                raise DataroomError(f"refused entry {name!r}: its folder is also the file entry {files[key(parts[:i])]!r}")


def _wrapper_prefix(all_parts: list[tuple[str, ...]]) -> int:
    """1 when every file sits under one common top folder, else 0."""
    if not all_parts or any(len(p) < 2 for p in all_parts):
        return 0
    return 1 if len({p[0] for p in all_parts}) == 1 else 0


def _folder_members(src: Path, limits: DataroomLimits) -> list[tuple[Path, str, int]]:
    """(path, relative path, size) of the regular files a folder contributes; links and special files never are."""
    members, total = [], 0
    for root, dirs, names in os.walk(src, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(root, d)))
        for name in sorted(names):
            path = Path(root) / name
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = path.relative_to(src)
            total += st.st_size
            if len(members) + 1 > limits.max_files:
                raise DataroomError(f"refused {src}: more than max_files={limits.max_files} files{hint('max_files')}")
            if st.st_size > limits.max_file_bytes or total > limits.max_bytes:
                raise DataroomError(f"refused {rel}: exceeds the size caps (max_file_bytes={limits.max_file_bytes}, max_bytes={limits.max_bytes})"
                                     f"{hint('max_bytes')}")
            members.append((path, rel.as_posix(), st.st_size))
    return members


def _copy_folder(src: Path, dest: Path, limits: DataroomLimits) -> list[tuple[str, int, str]]:
    entries = []
    for path, rel, size in _folder_members(src, limits):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        entries.append((rel, size, sha256_file(target)))
    return entries


def _set_modes(root: Path, dir_mode: int, file_mode: int) -> None:
    """chmod a tree without following links, at any depth: links are skipped, never used as a way in.

    Walked one directory descriptor at a time (safefs.walk), so a tree the model made deeper than PATH_MAX
    (30 folders of 200 characters) is handled like any other.
    """
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        if stat.S_ISREG(st.st_mode):
            os.chmod(root, file_mode)
        return
    os.chmod(root, dir_mode | stat.S_IRWXU)  # so the walk can enter it; set for real below

    # chmod by name after lstat said what it is: nothing runs in the box while the harness does this.
    def visit(entry: safefs.Entry) -> bool:
        if stat.S_ISDIR(entry.st.st_mode):
            os.chmod(entry.name, dir_mode | stat.S_IRWXU, dir_fd=entry.dir_fd)
            return True
        if stat.S_ISREG(entry.st.st_mode):
            os.chmod(entry.name, file_mode, dir_fd=entry.dir_fd)
        return False

    def leave(entry: safefs.Entry) -> None:  # read-only: directories last, or the walk could not have entered them
        if dir_mode | stat.S_IRWXU != dir_mode:
            os.chmod(entry.name, dir_mode, dir_fd=entry.dir_fd)

    safefs.walk(root, visit, leave)
    os.chmod(root, dir_mode)


def make_read_only(root: Path) -> None:
    """The dataroom's modes: nothing in it can be written, by the agent or by accident."""
    _set_modes(root, 0o555, 0o444)


def make_writable(root: Path) -> None:
    """Undo the read-only bits so a run directory can be deleted; links (the model's too) are never followed."""
    _set_modes(Path(root), 0o755, 0o644)


def remove_tree(path: Path) -> None:
    """Delete a tree the model may have made, at any depth and whatever its modes, without following any link.

    shutil.rmtree recurses in Python (a tree a few thousand folders deep raises RecursionError) and needs
    writable folders; this walks one directory descriptor at a time and opens each folder up as it goes.
    """
    path = Path(path)
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        safefs.remove_at(parent, path.name)
    finally:
        os.close(parent)


def _remove_unfollowed(path: Path, keep_dir: bool = False) -> None:
    """Delete what is at path without following links: a link (or file) is unlinked, a folder emptied and removed.

    keep_dir: leave a real directory alone (only a link or non-directory in its place is removed).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
    elif not keep_dir:
        remove_tree(path)

