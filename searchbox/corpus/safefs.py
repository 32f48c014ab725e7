"""The one way the harness touches files the model could have made: no links, no special files, capped, never blocking.

Everything under a run's `work/` may have been made by the model (through bash or a tool), so the
harness, grading and the web app read and write there only through these functions. Paths are
walked one component at a time with O_NOFOLLOW from a trusted root, so a symlink anywhere on the
way is refused rather than followed; files are opened with O_NONBLOCK and checked with fstat, so a
FIFO or device never blocks or gets read; reads stop at a cap.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator, Optional

from ..errors import SearchboxError

READ_CAP = 16 * 1024**2  # default most bytes read from one model-made file
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafePath(SearchboxError):
    """A path under a run's root is a link, a special file, or leaves the root."""


def parts_of(rel: str | os.PathLike) -> tuple[str, ...]:
    """The components of a relative path; absolute paths and `..` are refused."""
    text = os.fspath(rel)
    if "\x00" in text:
        raise UnsafePath(f"{text!r}: NUL byte in path")
    pure = PurePosixPath(text)
    if pure.is_absolute():
        raise UnsafePath(f"{text}: absolute path")
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if ".." in parts:
        raise UnsafePath(f"{text}: leaves its root")
    return parts


@contextlib.contextmanager
def _parent_fd(root: Path, parts: tuple[str, ...], create: bool = False) -> Iterator[int]:
    """An fd of the directory holding parts[-1], walked without following any link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:  # ELOOP (a link) or ENOTDIR (a file where a directory should be)
                raise UnsafePath(f"{'/'.join(parts)}: {name} is not a plain directory") from exc
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def lstat(root: Path, rel: str | os.PathLike) -> Optional[os.stat_result]:
    """The entry's own stat (links not followed), or None when it or a parent is missing or unsafe."""
    parts = parts_of(rel)
    if not parts:
        return os.stat(root)
    try:
        with _parent_fd(Path(root), parts) as fd:
            return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except (OSError, UnsafePath):
        return None


def is_regular(root: Path, rel: str | os.PathLike) -> bool:
    """True only for a regular file reached without links."""
    st = lstat(root, rel)
    return st is not None and stat.S_ISREG(st.st_mode)


def read_bytes(root: Path, rel: str | os.PathLike, cap: int = READ_CAP) -> Optional[bytes]:
    """At most `cap` bytes of a regular file under root; None when missing, a link, a directory or special."""
    parts = parts_of(rel)
    if not parts:
        return None
    try:
        with _parent_fd(Path(root), parts) as dfd:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dfd)
    except (OSError, UnsafePath):
        return None  # missing, a symlink (ELOOP), or a parent that is not a plain directory
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_fd(fd, cap)
    finally:
        os.close(fd)


def read_fd(fd: int, cap: int) -> bytes:
    """At most `cap` bytes from an open descriptor, read in blocks (a file that grows while read stops at the cap)."""
    chunks, left = [], cap
    while left > 0:
        block = os.read(fd, min(left, 1 << 20))
        if not block:
            break
        chunks.append(block)
        left -= len(block)
    return b"".join(chunks)


def read_text(root: Path, rel: str | os.PathLike, cap: int = READ_CAP) -> Optional[str]:
    """Like read_bytes, decoded as UTF-8 with undecodable bytes replaced."""
    data = read_bytes(root, rel, cap)
    return None if data is None else data.decode("utf-8", errors="replace")


def write_bytes(root: Path, rel: str | os.PathLike, data: bytes, *, replace: bool = True, mkdirs: bool = True) -> None:
    """Write a regular file under root atomically (temp + rename), never through a link.

    With replace=False an existing entry of any kind is left alone and UnsafePath is raised. A
    rename replaces a symlink itself, never its target; a directory or special file in the way is
    refused.
    """
    parts = parts_of(rel)
    if not parts:
        raise UnsafePath("empty path")
    name = parts[-1]
    try:
        with _parent_fd(Path(root), parts, create=mkdirs) as dfd:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and (not replace or not stat.S_ISREG(st.st_mode)):
                raise UnsafePath(f"{'/'.join(parts)}: already exists and is {'a link or special file' if not stat.S_ISREG(st.st_mode) else 'kept'}")
            tmp = f".{name}.{os.getpid()}.tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except UnsafePath:
        raise
    except OSError as exc:
        raise UnsafePath(f"{'/'.join(parts)}: cannot write ({exc.strerror or exc})") from exc


def write_text(root: Path, rel: str | os.PathLike, text: str, **kw) -> None:
    write_bytes(root, rel, text.encode("utf-8", errors="replace"), **kw)


@dataclass
class Entry:
    """One entry met by `walk`: its name in the open directory `dir_fd`, its own stat, and its path below the root."""

    dir_fd: int  # valid only while the callback runs
    name: str
    st: os.stat_result
    parts: tuple[str, ...]  # path components below the root (the last is name)


@dataclass
class _Frame:
    fd: Optional[int]  # None while closed to bound the open descriptors; reopened through ".."
    st: os.stat_result
    names: Iterator[str]
    entry: Optional[Entry]  # how the parent met this directory (None for the root)


MAX_OPEN_DIRS = 64  # directory descriptors a walk keeps open; deeper ones are reached again through ".."


def walk(root: Path | int, visit: Callable[[Entry], bool], leave: Optional[Callable[[Entry], None]] = None) -> None:
    """Walk the tree under root, depth first, names sorted, one directory descriptor at a time: any depth, any name.

    `visit(entry)` sees every entry before anything below it; it returns True to descend into a directory
    (a link is never descended into: directories are opened with O_NOFOLLOW). `leave(entry)` sees a directory
    after everything below it. No path string is ever handed to the kernel, so PATH_MAX does not matter, and
    at most MAX_OPEN_DIRS descriptors are open: a closed ancestor is reopened through ".." and must be the
    same directory (else UnsafePath). Walk only trees nothing changes meanwhile (between box calls).
    """
    top = os.open(root, _DIR_FLAGS) if not isinstance(root, int) else os.dup(root)
    frames = [_Frame(top, os.fstat(top), iter(sorted(os.listdir(top))), None)]
    try:
        while frames:
            frame = frames[-1]
            name = next(frame.names, None)
            if name is None:
                frames.pop()
                if frames and frames[-1].fd is None:
                    parent = frames[-1]
                    parent.fd = os.open("..", _DIR_FLAGS, dir_fd=frame.fd)
                    st = os.fstat(parent.fd)
                    if (st.st_dev, st.st_ino) != (parent.st.st_dev, parent.st.st_ino):
                        raise UnsafePath(f"{'/'.join(frame.entry.parts)}: its parent changed during the walk")
                os.close(frame.fd)
                if frame.entry is not None and leave is not None:
                    frame.entry.dir_fd = frames[-1].fd
                    leave(frame.entry)
                continue
            try:
                st = os.stat(name, dir_fd=frame.fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            parts = (frame.entry.parts if frame.entry else ()) + (name,)
            entry = Entry(frame.fd, name, st, parts)
            if not visit(entry) or not stat.S_ISDIR(st.st_mode):
                continue
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=frame.fd)
            except OSError:
                continue  # swapped for a link, or gone
            try:
                names = sorted(os.listdir(sub))
            except OSError:
                os.close(sub)
                continue
            frames.append(_Frame(sub, os.fstat(sub), iter(names), entry))
            if len(frames) > MAX_OPEN_DIRS:
                far = frames[-MAX_OPEN_DIRS - 1]
                if far.fd is not None:
                    os.close(far.fd)
                    far.fd = None
    finally:
        for frame in frames:
            if frame.fd is not None:
                os.close(frame.fd)


@contextlib.contextmanager
def dir_at(root_fd: int, parts: tuple[str, ...]) -> Iterator[int]:
    """An fd of the folder at parts below an open root folder, walked without following any link."""
    fd = os.dup(root_fd)
    try:
        for name in parts:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise UnsafePath(f"{'/'.join(parts)}: {name} is not a plain directory") from exc
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def remove_at(dir_fd: int, name: str) -> None:
    """Delete the entry `name` of an open folder: a folder with all it holds, at any depth and whatever its modes
    (each is opened up before it is entered), a link or file by itself; no link is ever followed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd)  # lstat said a folder; nothing runs in the box meanwhile

    def visit(entry: Entry) -> bool:
        if stat.S_ISDIR(entry.st.st_mode):
            os.chmod(entry.name, stat.S_IRWXU, dir_fd=entry.dir_fd)
            return True
        os.unlink(entry.name, dir_fd=entry.dir_fd)
        return False

    def leave(entry: Entry) -> None:
        os.rmdir(entry.name, dir_fd=entry.dir_fd)

    sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        walk(sub, visit, leave)
    finally:
        os.close(sub)
    os.rmdir(name, dir_fd=dir_fd)


@dataclass
class Listing:
    """The regular files under a root: (relative path, size), and whether the listing stopped short."""

    files: list[tuple[str, int]]
    truncated: bool = False  # cap_files or max_depth reached


def list_files(root: Path, cap_files: int = 100_000, max_depth: Optional[int] = None) -> Listing:
    """(relative path, size) of the regular files under root, depth first, names sorted; links and special files
    skipped; any depth and any name (names that are not UTF-8 come back as surrogate escapes, as os.listdir gives
    them). The one listing of model-made trees for the harness, grading and the web app. A root that is missing
    or not a plain directory lists nothing."""
    out: list[tuple[str, int]] = []
    truncated = False

    class _Stop(Exception):
        pass

    def visit(entry: Entry) -> bool:
        nonlocal truncated
        if stat.S_ISREG(entry.st.st_mode):
            if len(out) >= cap_files:
                truncated = True
                raise _Stop
            out.append(("/".join(entry.parts), entry.st.st_size))
            return False
        if stat.S_ISDIR(entry.st.st_mode):
            if max_depth is not None and len(entry.parts) >= max_depth:
                truncated = True
                return False
            return True
        return False

    try:
        walk(root, visit)
    except _Stop:
        pass
    except (OSError, UnsafePath):
        if not out:
            return Listing([], False)
        truncated = True
    out.sort(key=lambda item: walk_order(item[0]))
    return Listing(out, truncated)


def walk_order(rel: str) -> list[tuple[int, str]]:
    """Sort key giving os.walk's order, which callers hash: a folder's files (sorted), then its subfolders (sorted)."""
    names = rel.split("/")
    return [(1, p) for p in names[:-1]] + [(0, names[-1])]


def walk_files(root: Path, cap_files: int = 100_000) -> list[tuple[str, int]]:
    """(relative path, size) of regular files under root, links and special files skipped, sorted (see list_files)."""
    return list_files(root, cap_files).files
