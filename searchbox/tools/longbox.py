"""A box that lives for a whole run (Pi and everything it starts), beside the per-call box of sandbox.run_confined.

The same bubblewrap box as a bash call (sandbox.wrap: the system read-only, a generated /etc, no network, uid
65534, no capabilities, the seccomp filter, the env allowlist, per-process limits), with three differences a
process living the whole run needs:

- work/ has one path in the box (`inside`, e.g. /work) whatever the run directory is called, so what the
  process sees and says (Pi's prompt names its cwd) does not depend on where the run lives on the host;
- `private` folders outside work/ (Pi's session) are writable by the box and read by the harness, and
  `hidden` names under work/ are empty and read-only (Pi reads its project config from work/.pi);
- with a quota, one tmpfs (boxwork's wrapper, size= and nr_inodes=) holds work/ *and* the private folders for
  the whole run. work/ is copied in once, at the start; while the box lives the harness reads and writes the
  box's files through `work_view` (a path into that tmpfs by its descriptor) and `persist()` writes work/ back
  to disk (at each turn's end, and when the box is gone, which is the copy the run keeps).

The memory watchdog spares the long-lived process itself: past box_memory_bytes it kills the other processes
of the box (a tool's command), as a bash call's box is killed; only when that process alone is over does the
whole box go. Closing kills the box's pid 1, so nothing started in it outlives the run.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..corpus import safefs
from ..errors import SandboxError
from . import boxwork, sandbox

STDERR_CAP = 256 * 1024  # bytes of the process's stderr kept (the last ones)
SANDBOX_UID = sandbox.SANDBOX_UID


def descends(pid: int, ancestor: int, depth: int = 64) -> bool:
    """Whether process `pid` is `ancestor` or below it, following /proc's parent links at most `depth` steps."""
    for _ in range(depth):
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid <= 1:
            return False
    return False


@dataclass
class _Tmpfs:
    """The quota tmpfs of a long box: its root, work/ and each private folder, as descriptors the harness holds."""

    root: int
    work: int
    disk: int  # work/ on disk
    private: dict[str, int]
    mirror: boxwork.Mirror


@dataclass
class LongBox:
    """A process running in the box for a whole run: its pipes, where the harness sees its files, and how it ends."""

    proc: subprocess.Popen
    inside: str  # work/'s path in the box
    work: Path  # work/ on disk (the run's copy)
    work_view: Path  # work/ as the box sees it now (the tmpfs while it lives, else work/ on disk)
    private_views: dict[str, Path]
    quota: Optional[boxwork.Quota] = None
    killed: list = field(default_factory=list)  # why the watchdog killed something
    _tmpfs: Optional[_Tmpfs] = None
    _box: Optional[sandbox._Box] = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _watchdog: Optional[threading.Thread] = None
    _stderr: bytearray = field(default_factory=bytearray)
    _stderr_reader: Optional[threading.Thread] = None
    _gone: bool = False

    # ---- while it lives ---------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def persist(self) -> str:
        """Write the box's work/ back to disk (changes only); the note for the model when work/ is full ('' else).

        While the box lives its processes may write as this copies: a file caught mid-change is copied as it was
        read, and one replaced meanwhile is left for the next persist (the last one runs when nothing is alive)."""
        t = self._tmpfs
        if t is None:
            return ""
        usage = boxwork.Usage.of(t.root)
        for attempt in (1, 2, 3):
            try:
                t.mirror.persist(t.work, t.disk)
                break
            except OSError:
                if self._gone or attempt == 3:
                    raise
                time.sleep(0.05)
        return "\n".join(n for n in (boxwork.quota_note(usage, self.quota), boxwork.lost_note(t.mirror)) if n)

    def holds(self, pid: int) -> bool:
        """Whether host pid `pid` is a process of this box: of its pid namespace, or (no box: sandbox=none) the
        process itself or one it started."""
        if pid <= 0 or self._gone:
            return False
        if self._box is not None:
            try:
                return os.stat(f"/proc/{pid}/ns/pid").st_ino == self._box.pid_ns
            except OSError:
                return False
        return descends(pid, self.proc.pid)  # sandbox=none: up the parent chain to the process started

    def stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    # ---- the end ------------------------------------------------------------------------------
    def kill(self) -> None:
        """Kill every process of the box (its pid 1 takes the pid namespace with it); the files stay readable."""
        if self._gone:
            return
        self._gone = True
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join()
        if self._box is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._box.pidfd, signal.SIGKILL)
            select.select([self._box.pidfd], [], [], 10)
            os.close(self._box.pidfd)
            self._box = None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=5)

    def release(self) -> None:
        """Free the tmpfs (after kill and the last persist); the views then point at work/ on disk."""
        t, self._tmpfs = self._tmpfs, None
        if t is not None:
            for fd in (t.work, t.disk, t.root, *t.private.values()):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.private_views = {}  # they were on the tmpfs: gone (a descriptor number may now name anything)
        self.work_view = self.work

    def close(self) -> str:
        """Kill, write work/ back, free: the quota note of the last persist."""
        try:
            self.kill()
            return self.persist()
        finally:
            self.release()


def start_box(argv: list[str], work: Path, readonly: list[Path], mode: str, limits: sandbox.Limits, *, cpu_s: float,
              inside: str = "/work", ro_binds: dict[str, str] | None = None, private: dict[str, str] | None = None,
              private_disk: Optional[Path] = None, hidden: tuple[str, ...] = (), env: dict[str, str] | None = None,
              seed: dict[str, dict[str, bytes]] | None = None) -> LongBox:
    """Start argv in a box of its own for the run, stdin and stdout piped.

    ro_binds: host path -> box path, read-only (the program and its modules). private: name -> box path of a
    writable folder outside work/ (on the quota tmpfs, else `private_disk/name`), seeded with `seed[name]`
    (file name -> bytes) before the program starts. hidden: names under work/ shown empty and read-only.
    env: fixed values beside the allowlist. mode none runs argv unboxed in work/ (the explicit unsafe opt-out):
    the private folders are on disk and `inside` is work/'s own path.
    """
    work = Path(work).resolve()
    private = dict(private or {})
    seed = dict(seed or {})
    disk_private = {name: Path(private_disk or work.parent) / name for name in private}
    if mode == "none":
        _seed_disk(disk_private, seed)
        full, _ = sandbox.wrap(argv, work, readonly, "none", limits, cpu_s)
        proc = subprocess.Popen(full, cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env={**sandbox.environment(work), **(env or {})})
        box = LongBox(proc, str(work), work, work, dict(disk_private))
        box._stderr_reader = _drain(proc.stderr, box._stderr)
        return box
    quota = sandbox.quota_of(limits)
    if quota is not None and (why := sandbox.quota_failure()):
        raise SandboxError(f"the box's work/ quota cannot be set up here ({why}): set harness.work_quota_mb=0 to run "
                           "without one (the run record then says so)")
    binds = [(src, dest, False) for src, dest in (ro_binds or {}).items()]
    stage = tmpfs_root = None
    if quota is None:
        _seed_disk(disk_private, seed)
        sandbox.grant(work, readonly)
        for path in disk_private.values():
            sandbox.grant(path, [])
        binds += [(str(disk_private[name]), dest, True) for name, dest in private.items()]
        work_source = None
    else:
        sources = [*sandbox.SYSTEM_DIRS, "/etc", str(work), *(str(Path(p).resolve()) for p in readonly),
                   *(str(Path(p.source).resolve()) for p in readonly if hasattr(p, "source")), *(ro_binds or {}),
                   sandbox.shutil.which("bwrap") or "/usr/bin/bwrap"]
        stage = boxwork.stage_dir(sources)
        binds += [(f"{stage}/{name}", dest, True) for name, dest in private.items()]
        work_source = f"{stage}/work"
    if hidden:
        empty = f"{stage}/.empty" if stage else str(_empty_dir(private_disk or work.parent))
        binds += [(empty, f"{inside}/{name}", False) for name in hidden]
    layered = sandbox.layers(work, readonly) if quota is not None else {}  # one answer for bwrap and the wrapper
    full, fds = sandbox.wrap(argv, work, readonly, mode, limits, cpu_s, work_source=work_source, inside=inside,
                             binds=tuple(binds), env=env, layered=frozenset(layered))
    info_r, info_w = os.pipe()
    fds.append(info_w)
    full[1:1] = ["--info-fd", str(info_w)]
    try:
        proc, ours = sandbox.spawn(full, fds, work, stage, quota, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                   layers={f"work/{name}": src for name, src in layered.items()})
    except BaseException:
        os.close(info_r)
        raise
    box = LongBox(proc, inside, work, work, dict(disk_private), quota)
    box._stderr_reader = _drain(proc.stderr, box._stderr)
    if quota is not None:
        try:
            box._tmpfs = _stage(proc, ours, work, readonly, quota, list(private), hidden, box, seed)
        except BaseException:
            os.close(info_r)
            box.kill()
            raise
        box.work_view = _fd_path(box._tmpfs.work)
        box.private_views = {name: _fd_path(fd) for name, fd in box._tmpfs.private.items()}
    box._box = sandbox._box_info(info_r)
    if box._box is None:
        box.kill()
        box.release()
        raise SandboxError(f"the box did not start: {box.stderr_text().strip()[-300:] or 'bwrap said nothing'}")
    spare = _child_of(box._box)
    box._watchdog = threading.Thread(target=_watch, args=(box._box, limits, box._stop, box.killed, spare), daemon=True)
    box._watchdog.start()
    return box


def _fd_path(fd: int) -> Path:
    """A path that reaches the folder a descriptor holds (the tmpfs is mounted in the box's namespace only)."""
    return Path(f"/proc/{os.getpid()}/fd/{fd}")


def _empty_dir(parent: Path) -> Path:
    path = Path(parent) / ".empty"
    path.mkdir(parents=True, exist_ok=True)
    for entry in path.iterdir():  # it must stay empty: it is shown where the box may not write
        raise SandboxError(f"{path}: expected an empty folder, found {entry.name}")
    return path


def _seed_disk(folders: dict[str, Path], seed: dict[str, dict[str, bytes]]) -> None:
    for name, path in folders.items():
        path.mkdir(parents=True, exist_ok=True)
        for file, data in seed.get(name, {}).items():
            safefs.write_bytes(path, file, data)


def _stage(proc: subprocess.Popen, sock: socket.socket, work: Path, readonly: list[Path], quota: boxwork.Quota,
           private: list[str], hidden: tuple[str, ...], box: LongBox, seed: dict[str, dict[str, bytes]]) -> _Tmpfs:
    """Take the tmpfs from the wrapper, lay out work/ and the private folders in it, copy work/ in, let bwrap start."""
    opened: list[int] = []
    try:
        try:
            root = boxwork.receive_stage(sock, quota)
        except OSError as exc:
            box._stderr_reader.join(timeout=5)
            said = box.stderr_text().strip().splitlines()
            raise SandboxError(f"the box's work/ quota could not be set up ({said[-1] if said else exc})") from exc
        opened.append(root)
        for name in ("work", ".empty", *private):
            os.mkdir(name, 0o755, dir_fd=root)
            if os.geteuid() == 0 and name != ".empty":
                os.chown(name, SANDBOX_UID, SANDBOX_UID, dir_fd=root, follow_symlinks=False)
        if os.geteuid() == 0:
            os.chown(root, SANDBOX_UID, SANDBOX_UID)
        tmp_work = os.open("work", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
        opened.append(tmp_work)
        fds = {}
        for name in private:
            fds[name] = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
            opened.append(fds[name])
            for file, data in seed.get(name, {}).items():
                safefs.write_bytes(_fd_path(fds[name]), file, data)
                if os.geteuid() == 0:
                    os.chown(file, SANDBOX_UID, SANDBOX_UID, dir_fd=fds[name], follow_symlinks=False)
        disk = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        opened.append(disk)
        # The read-only parts (dataroom/) are bound from disk and the hidden names shown empty: never copied either way.
        mirror = boxwork.Mirror(skip=frozenset(sandbox._top_readonly(work, readonly)) | frozenset(hidden))
        try:
            mirror.fill(disk, tmp_work)
        except boxwork.QuotaError as exc:
            raise SandboxError(f"work/ holds more than the box's quota of {quota.describe()}: {exc}") from exc
        sock.sendall(b"g")
        return _Tmpfs(root, tmp_work, disk, fds, mirror)
    except BaseException:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    finally:
        sock.close()


def _drain(stream, buf: bytearray) -> threading.Thread:
    """Keep the last STDERR_CAP bytes of a stream (the process's complaints), read as they come."""
    def run() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                buf.extend(chunk)
                if len(buf) > STDERR_CAP:
                    del buf[: len(buf) - STDERR_CAP]

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    return reader


def _child_of(box: sandbox._Box, wait_s: float = 10.0) -> Optional[int]:
    """The host pid of the box's first process under its pid 1 (the long-lived program), once it is there."""
    deadline = time.monotonic() + wait_s
    init = _pid_of(box)
    while init is not None and time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        except OSError:
            return None
        if children:
            return int(children[0])
        time.sleep(0.02)
    return None


def _pid_of(box: sandbox._Box) -> Optional[int]:
    try:
        for line in Path(f"/proc/self/fdinfo/{box.pidfd}").read_text().splitlines():
            if line.startswith("Pid:"):
                pid = int(line.split()[1])
                return pid if pid > 0 else None
    except (OSError, ValueError):
        return None
    return None


def _watch(box: sandbox._Box, limits: sandbox.Limits, stop: threading.Event, killed: list, spare: Optional[int]) -> None:
    """Past box_memory_bytes together, kill the box's processes but its pid 1 and `spare` (the long-lived one);
    the whole box when that one alone is over."""
    init = _pid_of(box)
    while not stop.wait(0.25):
        sizes = sandbox.resident(box.pid_ns)
        if sum(sizes.values()) <= limits.box_memory_bytes:
            continue
        if spare is not None and sizes.get(spare, 0) <= limits.box_memory_bytes:
            victims = [pid for pid in sizes if pid not in (spare, init)]
            killed.append(f"its processes passed {limits.box_memory_bytes >> 20} MiB of memory together: {len(victims)} killed")
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            continue
        killed.append(f"the box passed {limits.box_memory_bytes >> 20} MiB of memory: all of it killed")
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(box.pidfd, signal.SIGKILL)
        return
