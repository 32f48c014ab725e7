"""Running the agent's commands in a bubblewrap box that shows only the run's work/, as an unprivileged uid, with limits."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

from ..errors import SandboxError, SearchboxError
from . import boxwork, opens, seccomp
from .context import InvalidCall

FILE_SIZE_CAP = 512 * 1024**2  # no single file the agent writes may pass this
SANDBOX_UID = 65534  # "nobody": owns nothing on the host
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf")  # copied from the host: the loader needs them, they hold no secrets
ETC_DIRS = ("alternatives",)  # Debian's awk, editor, ... are links through /etc/alternatives
PATH = "/usr/local/bin:/usr/bin:/bin"
MAX_ARGUMENT_BYTES = 128 * 1024 - 1  # the kernel's MAX_ARG_STRLEN less the NUL: the longest string exec takes
MAX_ARGV_BYTES = 1024**2  # all of them together (ARG_MAX is a quarter of the stack limit, 2 MiB by default)
WRAPPERS = {"sudo", "env", "time", "nohup", "nice", "timeout", "command", "builtin", "exec", "then", "do", "else", "if", "while", "until", "!", "{", "}"}


@dataclass(frozen=True)
class Limits:
    """What one call may use; every limit holds for each process of the box, processes for the box as a whole."""

    processes: int = 128  # RLIMIT_NPROC (threads count too)
    memory_bytes: int = 2 * 1024**3  # RLIMIT_AS of each process
    file_bytes: int = FILE_SIZE_CAP  # RLIMIT_FSIZE
    open_files: int = 1024
    tmp_bytes: int = 256 * 1024**2  # the private /tmp and /dev/shm (tmpfs: counts as memory)
    box_memory_bytes: int = 4 * 1024**3  # resident memory of all the box's processes together (watched)
    work_bytes: int = 1024**3  # work/ outside dataroom/: a tmpfs of this size (0 = no quota, work/ bound from disk)
    work_files: int = 20_000  # and of this many inodes (files, folders, links); copying in costs ~70 us each per call


@dataclass
class ShellResult:
    """What a command did: exit code, capped output, whether it timed out."""

    exit_code: int
    output: str
    timed_out: bool
    output_bytes: int
    duration_s: float
    errors: str = ""  # stderr, when kept apart from the output
    killed: str = ""  # why the box was killed before the command ended (a limit it passed)
    full: str = ""  # the call filled work/'s quota, or made what work/ cannot keep: what the model should read (boxwork)
    opened: Optional[list[str]] = None  # work/-relative files the box's processes opened to read (tools.opens); None: not observed


def resolve_mode(mode: str) -> str:
    """bwrap or none; raises SandboxError when isolation is wanted but unavailable."""
    if mode == "none":
        return "none"
    if bwrap_works():
        return "bwrap"
    raise SandboxError(
        f"bash needs an isolated sandbox but bubblewrap does not work here ({probe_failure() or 'bwrap not found'}): "
        "`apt-get install bubblewrap`, or set harness.sandbox=none to run tools without isolation (unsafe)"
    )


@lru_cache(maxsize=1)
def probe_failure() -> str:
    """Why the box cannot be built on this machine ('' when it can): runs the real argv once on a scratch run."""
    if not shutil.which("bwrap"):
        return "bwrap not found"
    missing = [tool for tool in ("prlimit", "setpriv" if _as_root() else "") if tool and not shutil.which(tool)]
    if missing:
        return f"{' and '.join(missing)} (util-linux) not found"
    scratch = Path(tempfile.mkdtemp(prefix="searchbox-probe-"))
    try:
        work = scratch / "work"
        (work / "dataroom").mkdir(parents=True)
        (work / "dataroom" / "probe.txt").write_text("probe\n")
        check = "test -w . && test -r dataroom/probe.txt && ! touch dataroom/x 2>/dev/null && ! test -e /etc/shadow && id -u"
        try:
            res = run_shell(check, work, [work / "dataroom"], "bwrap", 20.0, 4096, Limits(work_bytes=0))
        except OSError as exc:
            return str(exc)
        if res.exit_code != 0 or res.output.strip() != str(SANDBOX_UID):
            return f"probe exited {res.exit_code}: {res.output.strip()[:300]}"
        return ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@lru_cache(maxsize=1)
def quota_failure() -> str:
    """Why the box's work/ quota (a sized tmpfs mounted by boxwork's wrapper) cannot be set up here ('' when it can)."""
    if probe_failure():
        return probe_failure()
    scratch = Path(tempfile.mkdtemp(prefix="searchbox-probe-"))
    try:
        work = scratch / "work"
        (work / "dataroom").mkdir(parents=True)
        quota = boxwork.Quota(8 * 1024**2, 64)
        try:
            res = _run(["bash", "-c", "df -P . | tail -1 | cut -d' ' -f1; touch made"], work, [work / "dataroom"], "bwrap",
                       20.0, 4096, Limits(), None, True, quota)
        except (OSError, SearchboxError, boxwork.QuotaError) as exc:
            return str(exc)
        if res.output.split()[:1] != ["searchbox-work"] or not (work / "made").exists():
            return f"probe exited {res.exit_code}: {res.output.strip()[:300]}"
        return ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def bwrap_works() -> bool:
    """Whether the box (the same argv run_shell uses) can be built on this machine."""
    return probe_failure() == ""


def _as_root() -> bool:
    return os.geteuid() == 0


def environment(work: Path | str) -> dict[str, str]:
    """The whole environment of a command: an allowlist with fixed values, nothing inherited from the harness."""
    return {"PATH": PATH, "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": "/tmp", "TERM": "dumb"}


def _limit_argv(limits: Limits, cpu_s: float) -> list[str]:
    """prlimit inside the box: RLIMIT_NPROC set there counts only the box's processes (see wrap)."""
    cpu = max(1, math.ceil(cpu_s))
    pairs = {"nproc": limits.processes, "as": limits.memory_bytes, "cpu": cpu, "fsize": limits.file_bytes,
             "nofile": limits.open_files, "core": 0}
    return ["prlimit", *(f"--{k}={v}:{v}" for k, v in pairs.items()), "--"]


def _etc_data(work: Path) -> dict[str, bytes]:
    home = str(work)
    return {
        "passwd": f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{home}:/bin/bash\n".encode(),
        "group": f"sandbox:x:{SANDBOX_UID}:\n".encode(),
        "nsswitch.conf": b"passwd: files\ngroup: files\nhosts: files\n",
        "hosts": b"127.0.0.1 localhost\n::1 localhost\n",
        "hostname": b"sandbox\n",
        # ripgrep run from bash (RIPGREP_CONFIG_PATH below): files in path order, as the grep tool lists them; its
        # threads otherwise print files as they finish, and the same command reads differently on a rerun.
        "ripgreprc": b"--sort=path\n",
    }


def _package_dir() -> Path:
    return Path(__file__).resolve().parents[1]


def wrap(argv: list[str], work: Path, readonly: list[Path], mode: str, limits: Limits = Limits(), cpu_s: float = 60.0,
         extra_ro: dict[str, str] | None = None, work_source: str | None = None, *, inside: str | None = None,
         binds: tuple[tuple[str, str, bool], ...] = (), env: dict[str, str] | None = None,
         layered: frozenset[str] = frozenset()) -> tuple[list[str], list[int]]:
    """The argv that runs `argv` in the box, and the fds it needs passed (the generated /etc files).

    Inside: the system's /usr and /lib*, a generated /etc, the run's work/ read-write at its own path
    with `readonly` sub-paths read-only, a private sized /tmp, fresh /proc and /dev, no network, uid
    65534 and no capabilities. Run by root, bwrap mounts as root without a user namespace and
    setpriv drops to the host's uid 65534 (a user namespace would keep host uid 0, for which the
    kernel never enforces RLIMIT_NPROC); run by anyone else, a user namespace maps the caller to
    65534. `extra_ro` binds single host files (e.g. a ripgrep outside /usr) at sandbox paths;
    `work_source` is bound at work/'s path instead of work/ itself (the quota tmpfs, see run_confined).
    A long-lived box (start_box), and a call for a harness whose agent sees work/ at a fixed path (Pi's /work), give
    `inside`: the path work/ has in the box (its own path when None); a long box also gives
    `binds`: (host source, box path, writable) folders or files beside it, and `env`: fixed values added to the
    environment's allowlist. `layered`: the read-only folders right under work/ that the quota wrapper mounts
    itself (`layers`, handed to `spawn` too): bwrap does not bind them.
    """
    if mode == "none":
        return _limit_argv(limits, cpu_s) + argv if shutil.which("prlimit") else argv, []
    work = Path(work).resolve()
    where = Path(inside) if inside else work  # work/'s path in the box
    cmd = ["bwrap"]
    if _as_root():
        # No user namespace: --unshare-all would add one (try), keeping host uid 0 inside.
        cmd += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        cmd += ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    cmd += ["--hostname", "sandbox"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            cmd += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    pkg = _package_dir()
    if any(pkg.is_relative_to(os.path.realpath(d)) for d in SYSTEM_DIRS if os.path.isdir(d)):
        cmd += ["--tmpfs", str(pkg)]  # an installed searchbox ships the gold answers (builtin/questions.jsonl)
    fds = []
    cmd += ["--dir", "/etc"]
    for name, data in _etc_data(where).items():
        fd = os.memfd_create(f"etc-{name}")  # close-on-exec; pass_fds hands it to bwrap only
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        fds.append(fd)
        cmd += ["--perms", "0644", "--ro-bind-data", str(fd), f"/etc/{name}"]
    for name in ETC_FILES + ETC_DIRS:
        cmd += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    if os.path.islink("/etc/localtime"):
        cmd += ["--symlink", os.readlink("/etc/localtime"), "/etc/localtime"]
    cmd += ["--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm",
            "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    mounted = ("/tmp", "/etc", "/proc", "/dev", *SYSTEM_DIRS)
    made: set[Path] = set()

    def parents_of(path: Path) -> list[str]:
        out = []
        for parent in reversed(path.parents):
            if str(parent) != "/" and parent not in made and not any(parent == Path(m) or parent.is_relative_to(m) for m in mounted if m != "/tmp") \
                    and str(parent) != "/tmp":
                made.add(parent)
                out += ["--perms", "0755", "--dir", str(parent)]  # mirrored host modes (0700) would lock uid 65534 out
        return out

    cmd += parents_of(where)
    made.add(where)  # binds inside work/ (a hidden .pi) need no folder made for them
    cmd += ["--bind", work_source or str(work), str(where)]  # work_source: the quota tmpfs (boxwork), else work/ itself
    for path in readonly:
        p = Path(path).resolve()
        src = Path(getattr(path, "source", p)).resolve()  # a Mount (corpus.dataroom): the shared copy, bound at p
        if p.parent == work and p.name in layered:
            continue
        if src.exists() and (src == p or p.is_dir()):
            cmd += ["--ro-bind", str(src), str(where / p.relative_to(work)) if inside and p.is_relative_to(work) else str(p)]
    for src, dest in (extra_ro or {}).items():
        cmd += ["--ro-bind", src, dest]
    for src, dest, writable in binds:
        cmd += parents_of(Path(dest)) + ["--bind" if writable else "--ro-bind", src, dest]
    cmd += ["--remount-ro", "/", "--chdir", str(where), "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in {**environment(where), "RIPGREP_CONFIG_PATH": "/etc/ripgreprc", **(env or {})}.items():
        cmd += ["--setenv", key, value]
    fd = os.memfd_create("seccomp")  # the same filter as root or not: no nested namespaces, mounts, tracing, ...
    os.write(fd, seccomp.program())
    os.lseek(fd, 0, os.SEEK_SET)
    fds.append(fd)
    cmd += ["--seccomp", str(fd)]
    # bwrap is the box's pid 1, and its command line is world-readable at /proc/1/cmdline: its options (the binds'
    # host paths: the run folder, $SEARCHBOX_HOME, the checkout) go to it through a descriptor, the command after --.
    fd = os.memfd_create("bwrap-args")
    os.write(fd, b"".join(os.fsencode(a) + b"\0" for a in cmd[1:]))
    os.lseek(fd, 0, os.SEEK_SET)
    fds.append(fd)
    cmd = [cmd[0], "--args", str(fd), "--"]
    if _as_root():
        cmd += ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd + _limit_argv(limits, cpu_s) + argv, fds


def grant(work: Path, readonly: list[Path]) -> None:
    """Root only: hand work/ (not its read-only parts) to the sandbox uid, without following any link.

    Runs between calls, when no process of the box is alive, so nothing can swap an entry under it.
    """
    if not _as_root():
        return
    skip = {os.path.realpath(p) for p in readonly}
    root = os.path.realpath(work)
    for dirpath, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in skip]
        for name in [*dirs, *names]:
            _own(os.path.join(dirpath, name))
    _own(root)


def _own(path: str) -> None:
    try:
        st = os.lstat(path)
        if st.st_uid != SANDBOX_UID and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            os.chown(path, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
    except OSError:
        pass  # gone meanwhile, or a filesystem without ownership: the command will just not write there


def check_argument(value: str, what: str) -> bytes:
    """value as exec will pass it, or InvalidCall naming `what` when exec cannot carry it (the model's doing)."""
    if "\x00" in value:
        raise InvalidCall(f"{what} holds a NUL byte, which no command line can carry")
    try:
        data = os.fsencode(value)
    except UnicodeEncodeError as exc:
        raise InvalidCall(f"{what} is not valid Unicode (a lone surrogate at character {exc.start}, e.g. half an emoji)") from exc
    if len(data) > MAX_ARGUMENT_BYTES:
        raise InvalidCall(f"{what} is {len(data)} bytes; the most one command line argument can hold is {MAX_ARGUMENT_BYTES} bytes "
                          "(write long scripts or data to a file and run or read that)")
    return data


def _check_argv(argv: list[str]) -> None:
    total = sum(len(check_argument(arg, f"argument {i} of {os.path.basename(argv[0])}")) + 1 for i, arg in enumerate(argv))
    if total > MAX_ARGV_BYTES:
        raise InvalidCall(f"the arguments of {os.path.basename(argv[0])} are {total} bytes together; the most is {MAX_ARGV_BYTES}")


def spawn(full: list[str], fds: list[int], work: Path, stage: str | None, quota, *, stdin, stderr,
          tracer: list[str] | None = None, layers: dict[str, str] | None = None) -> tuple[subprocess.Popen, socket.socket | None]:
    """Start the box `wrap` built, under the quota wrapper when there is a quota (then `ours` is the harness's end of
    the wrapper's socket), and all of it under `tracer` when given (tools.opens: outermost, so that it follows the
    wrapper, bwrap and everything in the box); the fds handed to the box are closed here whether or not it started."""
    ours = theirs = None
    # bwrap's own environment and folder (its pid 1 keeps them) name no host path: the box sets its own. Unboxed
    # (sandbox=none) the command runs where it is, in work/ itself.
    boxed = quota is not None or os.path.basename(full[0]) == "bwrap"
    if quota is not None:
        ours, theirs = socket.socketpair()
        fds.append(theirs.fileno())
        full = boxwork.wrapper_argv(stage, quota, theirs.fileno(), layers) + full
    full = [*(tracer or ()), *full]
    try:
        home = "/" if boxed else str(work)
        proc = subprocess.Popen(full, cwd=home, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                                env=environment(home), pass_fds=fds)
    except BaseException:
        if ours is not None:
            ours.close()
        raise
    finally:
        for fd in fds:
            if theirs is None or fd != theirs.fileno():
                os.close(fd)
        if theirs is not None:
            theirs.close()
    return proc, ours


def run_confined(argv: list[str], work: Path, readonly: list[Path], mode: str, timeout_s: float, cap_bytes: int,
                 limits: Limits = Limits(), extra_ro: dict[str, str] | None = None, merge_stderr: bool = True,
                 inside: str | None = None, observe_opens: bool = False) -> ShellResult:
    """Run argv in the box, in its own process group; when it ends (or times out) kill everything it started.

    Output is read as it comes and kept up to cap_bytes (stderr apart, also capped, unless merged). With a
    quota (limits.work_bytes), the box's work/ is a sized tmpfs filled from work/ and written back after
    (tools.boxwork); a call that fills it says so in ShellResult.full. With `observe_opens`, the box runs under
    strace (tools.opens) and ShellResult.opened lists the files under work/ it opened to read; it stays None (not
    observed) without a box (mode none) or where strace cannot trace (opens.unavailable()).
    """
    _check_argv(argv)  # before anything runs: a NUL, a lone surrogate or a huge argument is refused by exec
    work = Path(work)
    quota = quota_of(limits) if mode != "none" else None
    if quota is not None and (why := quota_failure()):
        raise SandboxError(f"the box's work/ quota cannot be set up here ({why}): set harness.work_quota_mb=0 to run "
                           "without one (the run record then says so)")
    try:
        return _run(argv, work, readonly, mode, timeout_s, cap_bytes, limits, extra_ro, merge_stderr, quota, inside, observe_opens)
    except boxwork.QuotaError:
        # work/ on disk no longer fits (files the harness wrote between calls): run with a tmpfs of its own size
        skip = frozenset(_top_readonly(work, readonly))
        return _run(argv, work, readonly, mode, timeout_s, cap_bytes, limits, extra_ro, merge_stderr,
                    boxwork.grown(quota, work, skip), inside, observe_opens)


def layers(work: Path, readonly: list[Path]) -> dict[str, str]:
    """work/'s read-only folders right under it (dataroom/), by name, with the host folder each shows. With a quota,
    boxwork's wrapper mounts them into the tmpfs (an overlay: the box's mountinfo then names no host path), not bwrap."""
    out = {}
    for path in readonly:
        p = Path(path).resolve()
        src = Path(getattr(path, "source", p)).resolve()
        if p.parent == Path(work).resolve() and p.is_dir() and src.is_dir():
            out[p.name] = str(src)
    return out


def _top_readonly(work: Path, readonly: list[Path]) -> set[str]:
    """The names of work/'s read-only parts that sit right under it (dataroom): bound from disk, never copied."""
    return {Path(p).resolve().name for p in readonly if Path(p).resolve().parent == work.resolve()}


def _run(argv: list[str], work: Path, readonly: list[Path], mode: str, timeout_s: float, cap_bytes: int, limits: Limits,
         extra_ro: dict[str, str] | None, merge_stderr: bool, quota: Optional[boxwork.Quota], inside: str | None = None,
         observe_opens: bool = False) -> ShellResult:
    log_dir = _opens_dir(work) if observe_opens and mode != "none" and not opens.unavailable() else None
    try:
        outside: list[int] = []  # the host pid of bwrap outside the box (strace's child), once the box has started
        result = _run_box(argv, work, readonly, mode, timeout_s, cap_bytes, limits, extra_ro, merge_stderr, quota, inside, log_dir,
                          outside)
        if log_dir is not None:
            result.opened = opens.read_log(os.path.join(log_dir, "opens.log"), str(Path(inside) if inside else work.resolve()),
                                           outside[0] if outside else None)
        return result
    finally:
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)


def _opens_dir(work: Path) -> Optional[str]:
    """A private folder for one call's strace log, in the host's temporary directory: the box shows none of it (its /tmp
    is its own), so nothing the command does can write or read the record of what it opened. None when the temporary
    directory lies under work/ (then the box would show it): not observed."""
    d = tempfile.mkdtemp(prefix="searchbox-opens-")
    if Path(d).resolve().is_relative_to(work.resolve()):
        shutil.rmtree(d, ignore_errors=True)
        return None
    return d


def _run_box(argv: list[str], work: Path, readonly: list[Path], mode: str, timeout_s: float, cap_bytes: int, limits: Limits,
             extra_ro: dict[str, str] | None, merge_stderr: bool, quota: Optional[boxwork.Quota], inside: str | None,
             log_dir: Optional[str], outside: list[int]) -> ShellResult:
    stage = None
    if quota is not None:
        sources = [*SYSTEM_DIRS, "/etc", str(work.resolve()), *(str(Path(p).resolve()) for p in readonly),
                   *(str(Path(p.source).resolve()) for p in readonly if hasattr(p, "source")), *(extra_ro or {}),
                   shutil.which("bwrap") or "/usr/bin/bwrap"]  # the wrapper execs bwrap after mounting: keep it in sight
        stage = boxwork.stage_dir(sources)
    elif mode != "none":
        grant(work, readonly)
    layered = layers(work, readonly) if quota is not None else {}  # one answer for bwrap's binds and the wrapper's mounts
    full, fds = wrap(argv, work, readonly, mode, limits, timeout_s + 1, extra_ro, work_source=stage, inside=inside,
                     layered=frozenset(layered))
    info_r = info_w = -1
    if mode != "none":
        info_r, info_w = os.pipe()
        fds.append(info_w)
        full[1:1] = ["--info-fd", str(info_w)]  # bwrap reports the host pid of the box's pid 1 here
    tracer = opens.tracer_argv(os.path.join(log_dir, "opens.log")) if log_dir is not None else None
    proc, ours = spawn(full, fds, work, stage, quota, stdin=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, tracer=tracer,
                       layers=layered)
    kept, errs = bytearray(), bytearray()
    total = [0, 0]

    def drain(stream, buf: bytearray, slot: int) -> None:
        while chunk := stream.read(65536):
            total[slot] += len(chunk)
            if len(buf) < cap_bytes:
                buf.extend(chunk[: cap_bytes - len(buf)])

    readers = [threading.Thread(target=drain, args=(proc.stdout, kept, 0), daemon=True)]
    if not merge_stderr:
        readers.append(threading.Thread(target=drain, args=(proc.stderr, errs, 1), daemon=True))
    for reader in readers:
        reader.start()
    staged = None
    if quota is not None:
        try:
            staged = _stage(proc, ours, work, readonly, quota, readers, kept, errs)
        except BaseException:
            os.close(info_r)
            raise
    start = time.monotonic()
    box = _box_info(info_r) if info_r >= 0 else None
    if box is not None and log_dir is not None and (parent := _parent_of(box.pid)):
        outside.append(parent)
    killed: list[str] = []
    stop = threading.Event()
    watchdog = threading.Thread(target=_watch, args=(box, limits, stop, killed), daemon=True) if box else None
    if watchdog:
        watchdog.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # Kill even after a normal exit: background children must not outlive the call. Killing the box's
        # pid 1 makes the kernel kill its whole pid namespace (setsid or nohup do not escape that); the
        # process group catches everything when there is no box.
        stop.set()
        if watchdog:
            watchdog.join()
        if box is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(box.pidfd, signal.SIGKILL)
            select.select([box.pidfd], [], [], 10)  # readable once pid 1 is gone, i.e. the namespace is empty
            os.close(box.pidfd)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # bwrap reaps its pid 1 and exits (killing it first would leave a zombie)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        full_note = _unstage(staged, quota) if staged is not None else ""
    for reader in readers:
        reader.join(timeout=5)
    text = bytes(kept).decode("utf-8", errors="replace")
    return ShellResult(proc.returncode if not timed_out else -9, text, timed_out, total[0], time.monotonic() - start,
                       bytes(errs).decode("utf-8", errors="replace"), "; ".join(killed), full_note)


@dataclass
class _Staged:
    """A call's work/ tmpfs (its root descriptor) beside work/ on disk, and what was copied in."""

    tmpfs: int
    disk: int
    mirror: boxwork.Mirror
    full_before: bool  # already full once filled: this call did not fill it


def _stage(proc: subprocess.Popen, sock: socket.socket, work: Path, readonly: list[Path], quota: boxwork.Quota,
           readers: list[threading.Thread], kept: bytearray, errs: bytearray) -> _Staged:
    """Take the tmpfs from the wrapper, copy work/ in, and let bwrap start; on any failure kill the wrapper and raise."""
    tmpfs = disk = -1
    try:
        try:
            tmpfs = boxwork.receive_stage(sock, quota)
        except OSError as exc:
            _kill(proc, readers)
            said = (bytes(kept) + bytes(errs)).decode("utf-8", "replace").strip().splitlines()
            raise SandboxError(f"the box's work/ quota could not be set up ({said[-1] if said else exc})") from exc
        disk = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        mirror = boxwork.Mirror(skip=frozenset(_top_readonly(work, readonly)))
        mirror.fill(disk, tmpfs)  # QuotaError: run_confined tries once more with a tmpfs that fits
        before = boxwork.Usage.of(tmpfs)
        sock.sendall(b"g")
        return _Staged(tmpfs, disk, mirror, before.full)
    except BaseException:
        for fd in (tmpfs, disk):
            if fd >= 0:
                os.close(fd)
        _kill(proc, readers)
        raise
    finally:
        sock.close()


def _unstage(staged: _Staged, quota: boxwork.Quota) -> str:
    """Write the call's changes back to disk and free the tmpfs; the note for the model when the call filled it."""
    try:
        usage = boxwork.Usage.of(staged.tmpfs)
        staged.mirror.persist(staged.tmpfs, staged.disk)
        full = "" if staged.full_before else boxwork.quota_note(usage, quota) or ""
        return "\n".join(n for n in (full, boxwork.lost_note(staged.mirror)) if n)
    finally:
        os.close(staged.tmpfs)
        os.close(staged.disk)


def _kill(proc: subprocess.Popen, readers: list[threading.Thread]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for reader in readers:
        reader.join(timeout=5)


def quota_of(limits: Limits) -> Optional[boxwork.Quota]:
    """The work/ quota these limits ask for (None: no quota, the box binds work/ itself)."""
    if limits.work_bytes <= 0 or limits.work_files <= 0:
        return None
    return boxwork.Quota(limits.work_bytes, limits.work_files)


def limits_for(harness) -> Limits:
    """The box's limits for a run: the defaults, with the run's work/ quota (HarnessConfig.work_quota_mb/_files)."""
    return Limits(work_bytes=int(harness.work_quota_mb) * 1024**2, work_files=int(harness.work_quota_files))


def quota_record(harness, mode: str) -> dict:
    """The quota as the run record keeps it: {} without a box or without a quota."""
    quota = quota_of(limits_for(harness)) if mode != "none" else None
    return {} if quota is None else {"work_bytes": quota.bytes, "work_files": quota.files}


@dataclass
class _Box:
    """A running box: a pidfd of its pid 1 (no pid reuse can misdirect a kill) and its pid namespace."""

    pidfd: int
    pid_ns: int
    pid: int = 0  # its host pid (for reading its parent: bwrap outside the box)


def _watch(box: _Box, limits: Limits, stop: threading.Event, killed: list[str]) -> None:
    """Kill the box when its processes together hold more than box_memory_bytes (RLIMIT_AS is per process)."""
    while not stop.wait(0.25):
        if sum(resident(box.pid_ns).values()) > limits.box_memory_bytes:
            killed.append(f"its processes passed {limits.box_memory_bytes >> 20} MiB of memory together")
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(box.pidfd, signal.SIGKILL)
            return


def resident(pid_ns: int) -> dict[int, int]:
    """Resident bytes of each process in the pid namespace (host pids), from the host's /proc."""
    out, page = {}, os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}/ns/pid").st_ino != pid_ns:
                continue
            with open(f"/proc/{name}/statm", "rb") as fh:
                out[int(name)] = int(fh.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to look at
    return out


def _parent_of(pid: int) -> Optional[int]:
    """A live process's parent pid (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _box_info(info_r: int) -> _Box | None:
    """The box's pid 1 and pid namespace from bwrap's --info-fd report (None if bwrap failed before reporting).

    Read up to the end of the report, not to end of file: a tracer around bwrap (tools.opens) holds the pipe's
    writing end open as long as the box lives, so end of file would come only when the call is over."""
    data, info = b"", None
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline and select.select([info_r], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(info_r, 4096)
            if not chunk:
                break
            data += chunk
            with contextlib.suppress(ValueError):
                info = json.loads(data)
                break
    finally:
        os.close(info_r)
    try:
        return _Box(os.pidfd_open(int(info["child-pid"])), int(info["pid-namespace"]), int(info["child-pid"]))
    except (ValueError, KeyError, TypeError, OSError):
        return None


def run_shell(command: str, work: Path, readonly: list[Path], mode: str, timeout_s: float, cap_bytes: int,
              limits: Limits = Limits(), inside: str | None = None, observe_opens: bool = False) -> ShellResult:
    """Run `bash -c command` in the box (work/ at `inside` there, else at its own path); a command exec cannot carry
    is InvalidCall."""
    check_argument(command, "the command")
    return run_confined(["bash", "-c", command], work, readonly, mode, timeout_s, cap_bytes, limits, inside=inside,
                        observe_opens=observe_opens)


def programs(command: str) -> list[str]:
    """The programs a shell command runs, in order, e.g. 'cat a | grep x && wc -l' -> [cat, grep, wc]."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    out: list[str] = []
    expect = True
    skip_next = False
    for tok in tokens:
        if tok and set(tok) <= set(";&|()\n"):
            expect = True
            continue
        if tok and set(tok) <= set("<>"):
            skip_next = True
            continue
        if skip_next:
            skip_next = False
            continue
        if not expect:
            continue
        if "=" in tok and not tok.startswith("=") and tok.split("=", 1)[0].isidentifier():
            continue  # VAR=value prefix
        if tok in WRAPPERS or tok.startswith("-") or tok.replace(".", "", 1).isdigit():
            continue
        out.append(os.path.basename(tok))
        expect = False
    return out
