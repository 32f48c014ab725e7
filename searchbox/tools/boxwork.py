"""The box's work/: a tmpfs sized in bytes and files for each call, filled from the run's work/ and written back after.

Why: RLIMIT_FSIZE caps one file, not how many (six 600 MB files, a million empty ones), and a watchdog
polling du can be outrun. A tmpfs mounted with size= and nr_inodes= cannot: the kernel refuses the
write (ENOSPC) that would pass either. bwrap mounts a tmpfs with size= only, so a small wrapper mounts
it before bwrap starts, in a mount namespace of its own (and, run by a normal user, in a user
namespace of its own, where mounting a tmpfs is allowed): root or not, the same kernel limits hold.

One call: the wrapper (a fresh Python, single-threaded, so it may unshare) mounts the tmpfs on a
directory that shadows nothing the box binds, hands the harness a descriptor of it over a socket,
and waits; the harness copies the run's work/ (all but its read-only parts, normally dataroom/) in;
the wrapper execs bwrap, which binds the tmpfs at work/'s path; when the box is gone, the harness
copies what changed back to disk through the same descriptor and closes it, which frees the tmpfs.
The disk copy is the run's record (ANSWER.md, the model's files), read and written by the harness
between calls exactly as before; files on it keep the modes, times, links and holes they had.

Copies walk both trees one directory descriptor at a time and never follow a link; entries deeper
than MAX_DEPTH levels are not written back (the harness's own walks stay bounded).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..corpus import safefs

SANDBOX_UID = 65534
MAX_DEPTH = 128  # levels of folders written back to disk; deeper ones live for the call only
LOST_SHOWN = 5  # entries named in the note when a call made things that cannot be kept
COPY_BLOCK = 1 << 20
PAGE = 4096
HANDSHAKE_S = 30.0
STAGE_CANDIDATES = ("/mnt", "/media", "/srv", "/opt", "/run", "/home", "/var/tmp", "/tmp", "/dev/shm")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# The wrapper, run as `python -I -S -c WRAPPER stage size files sock_fd [rel source]... -- bwrap ...`. It is the only
# code that runs with the right to mount; it runs nothing the model sent before exec'ing bwrap.
#
# Each (rel, source) is a read-only folder of work/ (dataroom/: the corpus's shared copy). A bind mount's root is a
# host path, and /proc/self/mountinfo in the box would print it ($SEARCHBOX_HOME, the corpus's identity). So the
# wrapper mounts an overlay instead, after the harness has filled the tmpfs: a fresh filesystem whose root is "/",
# with no upper layer (read-only by construction), whose two lower layers (the source and the empty mount point
# itself: overlayfs wants two without an upper) are named by descriptor, "/proc/self/fd/N", which is all mountinfo
# shows of them. Where overlayfs is missing, a read-only bind stands in (mountinfo then names the source).
WRAPPER = r"""
import ctypes, os, socket, sys
head = sys.argv[1:sys.argv.index("--")]
stage, size, files, sock_fd = head[0], int(head[1]), int(head[2]), int(head[3])
layers = list(zip(head[4::2], head[5::2]))
argv = sys.argv[sys.argv.index("--") + 1:]
libc = ctypes.CDLL(None, use_errno=True)
def check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
root = os.geteuid() == 0
uid, gid = os.geteuid(), os.getegid()
check(libc.unshare(0x00020000 | (0 if root else 0x10000000)), "unshare")  # CLONE_NEWNS (| CLONE_NEWUSER)
if not root:  # the caller becomes 65534 here, with the right to mount in namespaces this user namespace owns
    for name, text in (("setgroups", "deny"), ("uid_map", f"65534 {uid} 1"), ("gid_map", f"65534 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)
check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "make / private")  # MS_REC | MS_PRIVATE
opts = f"size={size},nr_inodes={files},mode=0755" + (",uid=65534,gid=65534" if root else "")
check(libc.mount(b"searchbox-work", stage.encode(), b"tmpfs", 0x2 | 0x4, opts.encode()), "mount the work/ tmpfs")
fd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY)
sock = socket.socket(fileno=sock_fd)
socket.send_fds(sock, [b"m"], [fd])
os.close(fd)
if sock.recv(1) != b"g":
    sys.exit(3)
sock.close()
RDONLY, NOSUID, NODEV, REMOUNT, BIND, REC = 0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000
for rel, source in layers:
    low = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    at = os.open(os.path.join(stage, rel), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    target = f"/proc/self/fd/{at}".encode()
    opts = f"lowerdir=/proc/self/fd/{low}:/proc/self/fd/{at}".encode()
    if libc.mount(b"searchbox-ro", target, b"overlay", RDONLY | NOSUID | NODEV, opts) != 0:
        check(libc.mount(source.encode(), target, None, BIND | REC, None), f"bind {rel}")
        top = os.path.join(stage, rel)  # by path: the descriptor still holds the folder under the new mount
        f = os.statvfs(top).f_flag  # the flags a user namespace must keep (ST_* = MS_*, but for relatime)
        keep = (f & (NOSUID | NODEV | 0x8 | 0x400 | 0x800)) | (0x200000 if f & 0x1000 else 0)
        check(libc.mount(None, top.encode(), None, REMOUNT | BIND | RDONLY | keep, None), f"make {rel} read-only")
    os.close(low)
    os.close(at)
os.execvp(argv[0], argv)
"""


class QuotaError(Exception):
    """The run's work/ does not fit the box's quota (the model's files; the message says which limit)."""


@dataclass(frozen=True)
class Quota:
    """The most the box's work/ may hold, outside its read-only parts."""

    bytes: int
    files: int  # files, folders, links: inodes

    def describe(self) -> str:
        return f"{self.bytes >> 20} MiB and {self.files} files"


def stage_dir(sources: list[str]) -> str:
    """A directory to mount the tmpfs on (in the wrapper's namespace only) that holds none of the box's bind sources."""
    for cand in STAGE_CANDIDATES:
        if not os.path.isdir(cand) or os.path.islink(cand):
            continue
        real = os.path.realpath(cand)
        if not any(os.path.realpath(s) == real or os.path.realpath(s).startswith(real + os.sep) for s in sources):
            return cand
    raise OSError(errno.ENOENT, "no directory to mount the box's work/ on: create /mnt")


def wrapper_argv(stage: str, quota: Quota, sock_fd: int, layers: dict[str, str] | None = None) -> list[str]:
    """layers: path under the stage (dataroom, work/dataroom) -> the host folder shown there read-only."""
    pairs = [part for rel, source in (layers or {}).items() for part in (rel, source)]
    return [sys.executable, "-I", "-S", "-c", WRAPPER, stage, str(quota.bytes), str(quota.files), str(sock_fd), *pairs, "--"]


def receive_stage(sock: socket.socket, quota: Quota) -> int:
    """The tmpfs's root descriptor from the wrapper (OSError when it failed: its stderr says why)."""
    sock.settimeout(HANDSHAKE_S)
    msg, fds, _, _ = socket.recv_fds(sock, 16, 1)
    if msg != b"m" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise OSError(errno.EPROTO, "the box's work/ could not be mounted")
    fd = fds[0]
    vfs = os.statvfs(fd)
    if vfs.f_files != quota.files:  # the descriptor is the tmpfs we asked for, not the directory under it
        os.close(fd)
        raise OSError(errno.EPROTO, f"the box's work/ is not the quota tmpfs ({vfs.f_files} inodes)")
    return fd


@dataclass
class Usage:
    """What the tmpfs held when the call ended."""

    bytes: int
    files: int
    full: bool  # no block or no inode left: some write of the call was refused

    @classmethod
    def of(cls, fd: int) -> "Usage":
        vfs = os.statvfs(fd)
        used = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
        return cls(used, vfs.f_files - vfs.f_ffree, vfs.f_bfree == 0 or vfs.f_ffree == 0)


@dataclass
class Mirror:
    """Copies between the run's work/ on disk and the box's tmpfs; remembers what it put in the tmpfs, so that only
    what the call changed is written back (a change of content, mode or times moves an inode's ctime)."""

    skip: frozenset  # top-level names of work/ that are bound read-only (dataroom), never copied
    root: bool = field(default_factory=lambda: os.geteuid() == 0)  # root: what it copies is handed to 65534
    placed: dict = field(default_factory=dict)  # parts -> st_ino in the tmpfs after copy-in
    ctimes: dict = field(default_factory=dict)  # st_ino -> st_ctime_ns after copy-in (hard links share one)
    dropped: int = 0  # entries not written back (deeper than MAX_DEPTH, sockets, devices), all calls together
    lost: list = field(default_factory=list)  # (path, why) of the last persist's dropped entries, the first LOST_SHOWN
    lost_count: int = 0  # the last persist's dropped entries
    _dst_root: int = -1
    _links: dict = field(default_factory=dict)

    def fill(self, disk: int, tmpfs: int) -> None:
        """Copy work/ from disk into the empty tmpfs (QuotaError when it does not fit)."""
        self._dst_root, self._links = tmpfs, {}
        try:
            self._mount_points(disk, tmpfs)
            self._sync(disk, tmpfs, (), to_box=True)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise QuotaError("work/ holds more than the box's quota") from exc
            raise

    def _mount_points(self, disk: int, tmpfs: int) -> None:
        """Where bwrap binds the read-only parts (dataroom/), made now: the tmpfs's usage after filling is then final."""
        for name in self.skip:
            try:
                st = os.stat(name, dir_fd=disk, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(name, 0o755, dir_fd=tmpfs)
            else:
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=tmpfs))
            if self.root:
                os.chown(name, SANDBOX_UID, SANDBOX_UID, dir_fd=tmpfs, follow_symlinks=False)

    def persist(self, tmpfs: int, disk: int) -> None:
        """Write what the call changed in the tmpfs back to work/ on disk; remove what it removed."""
        self._dst_root, self._links = disk, {}
        self.lost, self.lost_count = [], 0
        self._sync(tmpfs, disk, (), to_box=False)

    def _drop(self, here: tuple[str, ...], why: str, to_box: bool) -> None:
        self.dropped += 1
        if not to_box:
            self.lost_count += 1
            if len(self.lost) < LOST_SHOWN:
                self.lost.append(("/".join(here)[:300], why))

    # ---- one folder, both sides open --------------------------------------------------------
    def _sync(self, src: int, dst: int, parts: tuple[str, ...], to_box: bool) -> None:
        top = not parts
        src_names = [n for n in _names(src) if not (top and n in self.skip)]
        dst_names = {n for n in _names(dst) if not (top and n in self.skip)}
        keep = set(src_names)
        for name in dst_names - keep:
            _remove(dst, name)
        links = self._links  # (st_dev, st_ino) -> where its first copy went, across the whole tree
        for name in sorted(src_names):
            try:
                st = os.stat(name, dir_fd=src, follow_symlinks=False)
            except FileNotFoundError:
                continue
            here = parts + (name,)
            if not to_box and self.placed.get(here) == st.st_ino and self.ctimes.get(st.st_ino) == st.st_ctime_ns \
                    and not stat.S_ISDIR(st.st_mode) and name in dst_names:
                if st.st_nlink > 1:
                    links.setdefault((st.st_dev, st.st_ino), here)
                continue  # as it was put in: the disk copy is current
            if stat.S_ISDIR(st.st_mode):
                if len(here) > MAX_DEPTH:
                    self._drop(here, f"deeper than {MAX_DEPTH} folders", to_box)
                    if name in dst_names:
                        _remove(dst, name)
                    continue
                self._dir(src, dst, name, st, here, to_box)
            elif stat.S_ISREG(st.st_mode):
                self._file(src, dst, name, st, here, to_box, links)
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(name, dir_fd=src)
                _clear(dst, name)
                os.symlink(target, name, dir_fd=dst)
                self._finish(dst, name, st, here, to_box)
            elif stat.S_ISFIFO(st.st_mode):
                _clear(dst, name)
                os.mkfifo(name, stat.S_IMODE(st.st_mode), dir_fd=dst)
                self._finish(dst, name, st, here, to_box)
            else:
                self._drop(here, "a socket or device: nothing to copy", to_box)
                if name in dst_names:
                    _remove(dst, name)

    def _dir(self, src: int, dst: int, name: str, st: os.stat_result, here: tuple[str, ...], to_box: bool) -> None:
        try:
            dst_st = os.stat(name, dir_fd=dst, follow_symlinks=False)
        except FileNotFoundError:
            dst_st = None
        if dst_st is None or not stat.S_ISDIR(dst_st.st_mode):
            _clear(dst, name)
            os.mkdir(name, 0o700, dir_fd=dst)
        else:
            os.chmod(name, stat.S_IMODE(dst_st.st_mode) | stat.S_IRWXU, dir_fd=dst)  # so it can be filled
        opened = not self.root and (stat.S_IMODE(st.st_mode) & stat.S_IRWXU) != stat.S_IRWXU
        if opened:  # a normal user's harness cannot list a folder the model made 0500 or 0000 (root can)
            os.chmod(name, stat.S_IMODE(st.st_mode) | stat.S_IRWXU, dir_fd=src)
        try:
            sub_src = os.open(name, _DIR, dir_fd=src)
            try:
                sub_dst = os.open(name, _DIR, dir_fd=dst)
                try:
                    self._sync(sub_src, sub_dst, here, to_box)
                finally:
                    os.close(sub_dst)
            finally:
                os.close(sub_src)
        finally:
            if opened:
                os.chmod(name, stat.S_IMODE(st.st_mode), dir_fd=src)
        os.chmod(name, stat.S_IMODE(st.st_mode), dir_fd=dst)
        self._finish(dst, name, st, here, to_box, chmod=False)

    def _file(self, src: int, dst: int, name: str, st: os.stat_result, here: tuple[str, ...], to_box: bool,
              links: dict) -> None:
        if st.st_nlink > 1:  # hard links stay links: a thousand links to one file take its size once
            first = links.get((st.st_dev, st.st_ino))
            if first is not None and self._link(first, dst, name):
                self._finish(dst, name, st, here, to_box, chmod=False, times=False)
                return
            links[(st.st_dev, st.st_ino)] = here
        if to_box:  # the tmpfs starts empty: write the file in place, set everything through its descriptor
            self._fill_file(src, dst, name, st, here)
            return
        fd = _open_read(src, name, st)
        try:
            tmp = f".sb-copy-{os.getpid()}-{name[:40]}"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dst)
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst)
            try:
                _copy_data(fd, out, st.st_size)
            except BaseException:
                os.close(out)
                os.unlink(tmp, dir_fd=dst)
                raise
            os.close(out)
        finally:
            os.close(fd)
        _clear(dst, name, keep_files=True)
        os.rename(tmp, name, src_dir_fd=dst, dst_dir_fd=dst)
        self._finish(dst, name, st, here, to_box)

    def _fill_file(self, src: int, dst: int, name: str, st: os.stat_result, here: tuple[str, ...]) -> None:
        fd = _open_read(src, name, st)
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst)
            try:
                _copy_data(fd, out, st.st_size, dense=st.st_blocks * 512 >= st.st_size)
                os.fchmod(out, stat.S_IMODE(st.st_mode))
                if self.root:
                    os.fchown(out, SANDBOX_UID, SANDBOX_UID)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
                now = os.fstat(out)
            finally:
                os.close(out)
        finally:
            os.close(fd)
        self.placed[here] = now.st_ino
        self.ctimes[now.st_ino] = now.st_ctime_ns

    def _link(self, first: tuple[str, ...], dst: int, name: str) -> bool:
        """Hard-link name to the copy already made at `first` (reached from the destination's root, no link followed)."""
        try:
            with safefs.dir_at(self._dst_root, first[:-1]) as parent:
                _clear(dst, name)
                os.link(first[-1], name, src_dir_fd=parent, dst_dir_fd=dst, follow_symlinks=False)
            return True
        except (OSError, safefs.UnsafePath):
            return False  # copied instead

    def _finish(self, dst: int, name: str, st: os.stat_result, here: tuple[str, ...], to_box: bool,
                chmod: bool = True, times: bool = True) -> None:
        """Mode, owner and times as the source had them; remember what the tmpfs got."""
        link = stat.S_ISLNK(st.st_mode)
        if chmod and not link:
            os.chmod(name, stat.S_IMODE(st.st_mode), dir_fd=dst)
        if self.root:  # in the tmpfs for the box to use; on disk as before the quota (what the box made is 65534's)
            os.chown(name, SANDBOX_UID, SANDBOX_UID, dir_fd=dst, follow_symlinks=False)
        if times:
            with contextlib.suppress(OSError):
                os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst, follow_symlinks=False)
        if to_box:  # every change of an inode moves its ctime: keep the last, shared by all its links
            now = os.stat(name, dir_fd=dst, follow_symlinks=False)
            self.placed[here] = now.st_ino
            self.ctimes[now.st_ino] = now.st_ctime_ns


def _names(fd: int) -> list[str]:
    return os.listdir(fd)


def _open_read(dir_fd: int, name: str, st: os.stat_result) -> int:
    """The file for reading, never through a link; a file its owner made unreadable (chmod 000) is opened anyway."""
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, stat.S_IMODE(st.st_mode) | stat.S_IRUSR, dir_fd=dir_fd)  # ours (non-root) or root's anyway
        try:
            fd = os.open(name, _READ, dir_fd=dir_fd)
        finally:
            os.chmod(name, stat.S_IMODE(st.st_mode), dir_fd=dir_fd)
    got = os.fstat(fd)
    if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(got.st_mode):
        os.close(fd)
        raise OSError(errno.ESTALE, f"{name}: changed while being copied")
    return fd


def _copy_data(src: int, dst: int, size: int, dense: bool = False) -> None:
    """Copy the data of a file, keeping its holes (a sparse file stays sparse: the disk copy takes what the tmpfs did).

    dense: the file has no holes (as many blocks as bytes), so it is copied straight through."""
    if dense:
        pos = 0
        while pos < size:
            block = os.read(src, min(COPY_BLOCK, size - pos))
            if not block:
                break
            view = memoryview(block)
            while view:
                view = view[os.write(dst, view):]
            pos += len(block)
        return
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # only a hole is left
            raise
        end = os.lseek(src, start, os.SEEK_HOLE)
        while start < end:
            block = os.pread(src, min(COPY_BLOCK, end - start), start)
            if not block:
                end = start
                break
            view = memoryview(block)
            while view:
                n = os.pwrite(dst, view, start)
                view = view[n:]
                start += n
        pos = end
    os.ftruncate(dst, size)


def _clear(dir_fd: int, name: str, keep_files: bool = False) -> None:
    """Remove what is at name (a folder with all it holds), so something else can take its place; rename replaces a
    file, a link or a FIFO by itself, so with keep_files only a folder is removed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        _remove(dir_fd, name)
    elif not keep_files:
        os.unlink(name, dir_fd=dir_fd)


def _remove(dir_fd: int, name: str) -> None:
    """Delete an entry of an open folder, a folder with everything in it, never following a link."""
    safefs.remove_at(dir_fd, name)


def grown(quota: Quota, work: Path, skip: frozenset) -> Quota:
    """A quota that fits what work/ holds on disk now (at least `quota`): when files the harness wrote (write, edit,
    delivered results) pushed work/ past the quota, the call still runs, with no room to grow, so the model can
    clean up."""
    used, entries, seen = 0, 3, set()  # the tmpfs's root, dataroom/'s mount point, one spare

    def visit(entry: safefs.Entry) -> bool:
        nonlocal used, entries
        if len(entry.parts) == 1 and entry.name in skip:
            return False
        if (entry.st.st_dev, entry.st.st_ino) in seen:
            return False
        seen.add((entry.st.st_dev, entry.st.st_ino))
        entries += 1
        if stat.S_ISREG(entry.st.st_mode):
            used += max(entry.st.st_blocks * 512, 0) + PAGE
        elif stat.S_ISLNK(entry.st.st_mode):
            used += PAGE
        return stat.S_ISDIR(entry.st.st_mode) and len(entry.parts) < MAX_DEPTH

    safefs.walk(work, visit)
    return Quota(max(quota.bytes, used), max(quota.files, entries))


def quota_note(usage: Usage, quota: Quota) -> Optional[str]:
    """The tool error the model reads when the call filled work/ (None when it did not)."""
    if not usage.full:
        return None
    which = "files" if usage.files >= quota.files else "bytes"
    return (f"work/ is full: the box holds at most {quota.describe()} there (outside dataroom/), and this call "
            f"reached the limit on {which} ({usage.bytes >> 20} MiB, {usage.files} files now); writes past it failed "
            "with 'No space left on device'. Remove files you do not need.")


def lost_note(mirror: Mirror) -> Optional[str]:
    """The tool error the model reads when the last write-back left out what the call made (None when it kept all):
    like the quota's note, so that a tree the model built is never silently gone at its next call."""
    if not mirror.lost_count:
        return None
    shown = "; ".join(f"{path} ({why})" for path, why in mirror.lost)
    more = f" and {mirror.lost_count - len(mirror.lost)} more" if mirror.lost_count > len(mirror.lost) else ""
    return (f"work/ could not keep {mirror.lost_count} of the entries this call made, which are gone now: {shown}{more}. "
            f"Keep folders at most {MAX_DEPTH} levels deep and only files, folders and links in work/.")
