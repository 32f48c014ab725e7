"""Which dataroom files a boxed command opened to read, observed by the kernel (strace), never by matching its output.

Evidence (grading/evidence.py) may credit bash output only when the call read the gold file: `cd dataroom && echo
<gold> | base64 -d`, an echo beside `ls dataroom`, or python decoding its own base64 after a listdir print the gold
without reading it. strace runs outside the box, around bwrap (the box's seccomp filter forbids ptrace inside it, and a
tracer outside sees every process of the box through its namespaces), follows every child (-f) and prints each
successful open with its resolved path (-y), as the box sees it. A read is an open of a regular file: an O_DIRECTORY
open (ls, listdir, find) or an O_PATH one (bwrap's own mounts) reads no text.

Status: the parser and the tracer's argv, tested against real strace around real bwrap (tests/tools/test_opens.py);
not yet wired into sandbox.run_confined, the tool row or evidence (issue 29.2, left to the lead).
"""

from __future__ import annotations

import re
import shutil
from pathlib import PurePosixPath

# PID openat(AT_FDCWD</cwd>, "path", FLAGS[, MODE]) = FD</resolved/path>
_OPEN = re.compile(r'^\d+\s+(?:open|openat|openat2)\((?P<args>.*)\)\s+=\s+\d+<(?P<path>[^>\n]*)>\s*$')
NOT_A_READ = ("O_DIRECTORY", "O_PATH")


def tracer_argv(log: str) -> list[str]:
    """The strace prefix that writes every successful open of the command's process tree, resolved, to `log`."""
    return [shutil.which("strace") or "strace", "-f", "-qq", "-y", "-e", "trace=open,openat,openat2", "-e", "status=successful", "-o", log]


def dataroom_reads(log: str, dataroom: str) -> list[str]:
    """Dataroom-relative paths of the files the traced processes opened to read, in order, each once. `dataroom` is the
    dataroom's path as the box sees it."""
    root = PurePosixPath(dataroom)
    out: dict[str, None] = {}
    for line in log.splitlines():
        m = _OPEN.match(line)
        if not m or any(flag in m["args"] for flag in NOT_A_READ):
            continue
        path = PurePosixPath(m["path"])
        if path != root and path.is_relative_to(root):
            out[str(path.relative_to(root))] = None
    return list(out)
