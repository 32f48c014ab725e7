"""Which files a boxed command opened to read, observed by the kernel (strace), never by matching its output.

Evidence (grading/evidence.py) may credit bash output to a gold file only when the call read it: `cd dataroom && echo
<gold> | base64 -d`, an echo beside `ls dataroom`, or python decoding its own base64 after a listdir print the gold
without reading it. strace runs outside the box, around bwrap (the box's seccomp filter forbids ptrace inside it, and a
tracer outside sees every process of the box through its namespaces), follows every child (-f) and prints each
successful open with its resolved path (-y), as the box sees it. A read is any other open than an O_DIRECTORY
one (ls, listdir, find) or an O_PATH one (bwrap's own mounts), which read no text.

sandbox.run_confined runs a bash call's box under the tracer when `observe_opens` is asked and strace works here
(`unavailable()` says why not), with the log in a private folder of the host's temporary directory, which the box
does not show; the call's tool row keeps the work/-relative files it opened (`opened`, None when not observed).
--seccomp-bpf stops the traced processes only at the open calls, not at every call (benchmarks/opens_overhead.py).
A file the kernel opens for the command without an open call (an executable the box runs) is not seen: dataroom
files are not executable in practice, and a script is opened by its interpreter.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Optional

# PID openat(AT_FDCWD</cwd>, "path", FLAGS[, MODE]) = FD</resolved/path>; strace escapes '<', '>', '"', '\\' and every
# byte that is not printable ASCII (octal, or \n and the like) in both the quoted path and the resolved ones.
_OPEN = re.compile(r'^(?P<pid>\d+)\s+(?:open|openat|openat2)\((?P<args>.*)\)\s+=\s+\d+<(?P<path>[^>\n]*)>(?:\(deleted\))?\s*$')
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|<[^>]*>')  # the path argument and a resolved dirfd: no flags in them
_ESCAPE = re.compile(r'\\(?:([0-7]{1,3})|x([0-9a-fA-F]{2})|(.))', re.DOTALL)
_NAMED = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "e": 27}
NOT_A_READ = ("O_DIRECTORY", "O_PATH")
LOG_CAP = 256 * 1024**2  # bytes of one call's log read; past it the call's opens are not observed (a walk of millions)
OPENED_CAP = 10_000  # files one call's list keeps (record.ROW_LIST_CAP, the items of a row's list: tested equal); a call
#                      that opened more is not observed, rather than cut (the box's modules import no record: tests/tools)


def tracer_argv(log: str) -> list[str]:
    """The strace prefix that writes every successful open of the command's process tree, resolved, to `log`
    (and says nothing of its own: -qqq, so the command's output stays the command's)."""
    return [shutil.which("strace") or "strace", "-f", "-qqq", "--seccomp-bpf", "-y", "-e", "trace=open,openat,openat2",
            "-e", "status=successful", "-o", log]


@lru_cache(maxsize=1)
def unavailable() -> str:
    """Why opens cannot be observed here ("" when they can): no strace, a strace that cannot trace (ptrace refused, no
    --seccomp-bpf), or one that says anything of its own (it would say it into the command's output)."""
    if not shutil.which("strace"):
        return "strace not found"
    with tempfile.TemporaryDirectory(prefix="searchbox-opens-") as d:
        log = os.path.join(d, "log")
        try:
            res = subprocess.run([*tracer_argv(log), "cat", "/proc/self/stat"], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"strace did not run ({type(exc).__name__})"
        if res.returncode != 0 or not os.path.exists(log) or "/proc/self/stat" not in Path(log).read_text(errors="replace"):
            said = (res.stderr or b"").decode(errors="replace").strip().splitlines()
            return f"strace cannot trace here ({said[-1][:200] if said else f'exit {res.returncode}'})"
        if res.stderr.strip():  # a warning (no seccomp-bpf filtering here, say) would land in every command's output
            return f"strace is not silent here ({res.stderr.decode(errors='replace').strip().splitlines()[-1][:200]})"
    return ""


def reads_under(log: str, root: str, outside: Optional[int] = None) -> list[str]:
    """Paths relative to `root` (a folder as the box sees it) of the files the box's processes opened to read under it,
    in order, each once. `outside` is the pid of the process strace started (the quota wrapper, which execs bwrap),
    which runs on the host's side of the box: what it opens is no part of the command, and a host path can look like
    one in the box (the wrapper's python reads /work/... on a host whose checkout lives there, while the box shows
    work/ at /work). None: the log's first pid (that process opens its libraries before it starts the box)."""
    top = PurePosixPath(root)
    out: dict[str, None] = {}
    for line in log.splitlines():
        m = _OPEN.match(line)
        if not m:
            continue
        if outside is None:
            outside = m["pid"]
        if int(m["pid"]) == int(outside) or any(flag in _QUOTED.sub("", m["args"]) for flag in NOT_A_READ):
            continue
        path = PurePosixPath(unescaped(m["path"]))
        if path != top and path.is_relative_to(top):
            out[str(path.relative_to(top))] = None
    return list(out)


def unescaped(text: str) -> str:
    """A path as strace printed it, as the file system names it (bytes that are not UTF-8 as surrogate escapes, as
    os.fsdecode gives them)."""
    def byte(m: re.Match) -> bytes:
        if m[1] is not None:
            return bytes([int(m[1], 8) & 0xFF])
        if m[2] is not None:
            return bytes([int(m[2], 16)])
        return bytes([_NAMED[m[3]]]) if m[3] in _NAMED else m[3].encode()

    out, at = bytearray(), 0
    for m in _ESCAPE.finditer(text):
        out += text[at : m.start()].encode("utf-8", "surrogateescape") + byte(m)
        at = m.end()
    out += text[at:].encode("utf-8", "surrogateescape")
    return os.fsdecode(bytes(out))


def dataroom_reads(log: str, dataroom: str) -> list[str]:
    """Dataroom-relative paths of the files the traced processes opened to read, in order, each once. `dataroom` is the
    dataroom's path as the box sees it."""
    return reads_under(log, dataroom)


def read_log(path: str, root: str, outside: Optional[int] = None) -> Optional[list[str]]:
    """reads_under a log file, or None when it is missing, past LOG_CAP or opened past OPENED_CAP files (not observed,
    rather than half observed: a list cut short could leave out the gold file the output shows)."""
    try:
        if os.path.getsize(path) > LOG_CAP:
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            found = reads_under(fh.read(), root, outside)
    except OSError:
        return None
    return found if len(found) <= OPENED_CAP else None
