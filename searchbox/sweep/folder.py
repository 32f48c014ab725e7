"""A sweep directory as a shared resource: one launch at a time, one process per run, dead processes' leftovers removed.

A launch (the process running Hydra's multirun, or a `python -m searchbox.sweep` without -m) holds an
exclusive flock on `<sweep>/.sweep.lock` from before it writes sweep.json until its last job has ended; a
second launch into the same directory refuses in one line naming the holder. The jobs of the holding launch
(joblib or submitit workers, Slurm jobs, Ray tasks: other processes, maybe other hosts) take no launch lock:
Hydra's launchers wait for their jobs, so the launcher holds it for them. Inside a launch, a run is claimed
with an exclusive flock on `.claims/KEY` while it runs, so two jobs whose grid points give the same run
key never run it twice or delete each other's `.tmp-KEY-PID` folder (the claims live in `<sweep>/.claims/`); a `.tmp-*` folder whose claim is free
belongs to a process that died and is removed (when a launch starts, and when its run is claimed). On a file
system without flock (some network mounts) the locks degrade to nothing, said once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..errors import DiskFull, SearchboxError, no_space

LAUNCH_LOCK = ".sweep.lock"
TMP_PREFIX = ".tmp-"
CLAIM_POLL_S = 0.2
MIN_FREE = 1024**2  # a launch refuses to start with less free space than this in its directory
_NO_FLOCK = (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)
_warned = False


class SweepBusy(SearchboxError):
    """Another launch is writing this sweep directory."""


def _lock(fd: int, blocking: bool) -> bool:
    """flock(fd) exclusively; False when another holds it (non-blocking). A file system without flock: True, said once."""
    global _warned
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_FLOCK:
            raise
        if not _warned:
            _warned = True
            print(f"[sweep] this file system has no flock ({exc.strerror}): two launches into one sweep directory are not "
                  "kept apart here", file=sys.stderr, flush=True)
        return True


class LaunchLock:
    """The launch's hold on its sweep directory (released by release(), or by the kernel when the process ends)."""

    def __init__(self, fd: Optional[int]):
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def hold_launch(sweep_dir: Path, launch: str = "") -> LaunchLock:
    """Take the sweep directory for this launch (SweepBusy when another launch has it; DiskFull when its file system
    has less than MIN_FREE left), then remove what dead processes left in runs/."""
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(sweep_dir / LAUNCH_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        if not _lock(fd, blocking=False):
            raise SweepBusy(f"sweep directory {sweep_dir} is in use by another launch ({_holder(fd)}): wait for it to end, "
                            "or launch into another directory (sweep.name=... or sweep.root=...)")
        with contextlib.suppress(OSError):  # who holds it, for the message above; a full disk must not stop the lock
            data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "launch": launch,
                               "since": time.strftime("%Y-%m-%dT%H:%M:%S")}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        free = shutil.disk_usage(sweep_dir).free
        if free < MIN_FREE:  # a launch with no room to work would fail somewhere in Hydra's own writes, in a traceback
            raise DiskFull.of(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(sweep_dir)), sweep_dir)
    except BaseException:
        os.close(fd)
        raise
    clean_stale(sweep_dir / "runs")
    return LaunchLock(fd)


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said which"


@contextlib.contextmanager
def claim_run(runs_root: Path, key: str, give_up: Callable[[], bool] = lambda: False) -> Iterator[bool]:
    """Hold run `key` for this process while the block runs: yields True once claimed (waiting while another
    process or thread runs it), or False if give_up() turned true first."""
    claims = Path(runs_root).parent / ".claims"
    claims.mkdir(parents=True, exist_ok=True)
    fd = os.open(claims / key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        while not _lock(fd, blocking=False):
            if give_up():
                yield False
                return
            time.sleep(CLAIM_POLL_S)
        yield True
    finally:
        os.close(fd)  # closing drops the flock


def leftovers(runs_root: Path, key: str) -> list[Path]:
    """This run's `.tmp-KEY-PID` folders (only the claim holder may remove them)."""
    return sorted(Path(runs_root).glob(f"{TMP_PREFIX}{key}-*"))


def clean_stale(runs_root: Path) -> list[str]:
    """Remove every `.tmp-KEY-PID` folder whose run nobody claims now (its process died); their names."""
    from ..corpus.dataroom import remove_tree

    removed = []
    runs_root = Path(runs_root)
    if not runs_root.is_dir():
        return removed
    for tmp in sorted(runs_root.glob(f"{TMP_PREFIX}*")):
        key = tmp.name[len(TMP_PREFIX):].rsplit("-", 1)[0]
        with claim_run(runs_root, key, give_up=lambda: True) as mine:
            if mine and tmp.exists():
                remove_tree(tmp)
                removed.append(tmp.name)
    if removed:
        print(f"[sweep] removed {len(removed)} unfinished run folder(s) left by a process that died", file=sys.stderr, flush=True)
    return removed


def record_disk_full(run_dir: Path, exc: BaseException) -> DiskFull:
    """A run stopped by a full disk: free what the run itself can spare (its copy of the dataroom, made again on
    relaunch), then record the stop in its run_meta.json where the disk allows; the one-line error to raise."""
    from ..corpus.dataroom import remove_tree
    from ..record.record import read_meta, write_meta

    error = DiskFull.of(exc, run_dir)
    with contextlib.suppress(OSError, SearchboxError):
        remove_tree(Path(run_dir) / "work" / "dataroom")
    with contextlib.suppress(OSError):
        (Path(run_dir) / ".reserve").unlink()  # corpus.dataroom.RESERVE: the room a run keeps for this
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError, SearchboxError):
        meta = read_meta(run_dir)
        meta.update(status="complete", stop_reason="tool_error", stop_detail=f"stopped: {error}")
        write_meta(run_dir, meta)
    return error


def is_disk_full(exc: BaseException) -> bool:
    return no_space(exc) is not None


def refuse(exc: SearchboxError) -> None:
    """End the launch with the one-line reason (from a Hydra callback, where an exception would only be a warning)."""
    print(f"searchbox: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(2)
