"""Hostile battery, round two (box): attempts registered into tests.hostile_attempts.ATTEMPTS (imported at its end).

What the model can do from inside the box or through the built-in tools: hide files from the tools, hang the
fallback grep, gain capabilities in a nested namespace, fill the disk, make trees the harness chokes on, and
send arguments exec cannot carry.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tests.hostile_attempts import Breach, Unavailable, attempt, box, held


def _files(out: str) -> set[str]:
    return {line.split(":", 1)[0] for line in out.splitlines() if ":" in line}


# ---- tools that see what is there ----------------------------------------------------------------
@attempt("box", "a dataroom .ignore (and .gitignore, .rgignore, git's global excludes) hides gannet.md from grep")
def grep_ignore_files(tmp: Path) -> str:
    from searchbox.corpus.dataroom import make_read_only, make_writable

    with box(tmp) as b:
        room = b.ws.dataroom
        make_writable(room)
        (room / "gannet.md").write_text("Gannet Rock is 38.4 metres tall.\n")
        (room / ".hidden.md").write_text("Gannet, in a hidden file.\n")
        for name in (".ignore", ".gitignore", ".rgignore"):
            (room / name).write_text("gannet.md\n.hidden.md\n")
        make_read_only(room)
        b.bash("mkdir -p .config/git && echo '*.md' > .config/git/ignore")  # the box's $HOME is work/
        tool = _files(b.call("grep", pattern="Gannet", path="dataroom").output)
        shell = set(b.bash("grep -rl Gannet dataroom").split())
        held({"dataroom/gannet.md", "dataroom/.hidden.md"} <= tool, f"grep saw {sorted(tool)}, bash saw {sorted(shell)}")
        held(tool == shell, f"grep saw {sorted(tool)}, bash saw {sorted(shell)}")
        listed = b.call("ls", path="dataroom").output + b.call("find", pattern=".hidden*", path="dataroom").output
        held(".hidden.md" in listed, f"ls/find hid the dotfile: {listed!r}")
        return "grep, ls and find see what bash sees (ignore files not read, hidden files shown)"


@attempt("box", "without ripgrep, grep with (a+)+$ on 40 a's (catastrophic backtracking in the harness process)")
def fallback_grep_backtracking(tmp: Path) -> str:
    from unittest import mock

    with box(tmp, bash_timeout_s=3) as b:
        b.call("write", path="a.txt", content="a" * 40 + "!\n")
        start = time.monotonic()
        with mock.patch("shutil.which", lambda name: None):
            out = b.call("grep", pattern="(a+)+$", path="a.txt")
        took = time.monotonic() - start
        held(took < 30, f"the fallback grep ran {took:.0f}s")
        held(not out.ok and "timed out" in out.error, f"not stopped at the deadline: {out.output[:200]!r}")
        return f"killed at the 3 s deadline ({took:.1f}s)"


# ---- the box as tight as root allows -------------------------------------------------------------
@attempt("box", "unshare -U -r -n -m inside the box (every capability in a nested user namespace, tmpfs, netfilter)")
def nested_user_namespace(tmp: Path) -> str:
    with box(tmp) as b:
        out = b.bash("unshare -U -r -n -m sh -c 'id -u; mount -t tmpfs x /tmp && echo MOUNTED' 2>&1; echo rc=$?; "
                     "unshare -U true 2>&1; grep Seccomp: /proc/self/status")
        held("MOUNTED" not in out and "rc=1" in out, f"nested namespace made: {out!r}")
        held(out.count("Operation not permitted") >= 2, f"unshare not refused by the filter: {out!r}")
        held("Seccomp:\t2" in out, f"no seccomp filter: {out!r}")
        return f"unshare refused (EPERM), filter on; as {'root' if os.geteuid() == 0 else 'a normal user'}"


@attempt("box", "bpf, perf_event_open, userfaultfd, keyctl, ptrace, mount, io_uring, init_module from inside the box")
def dangerous_syscalls(tmp: Path) -> str:
    from searchbox.tools import seccomp

    if seccomp.platform.machine() != "x86_64" or not Path("/usr/bin/python3").exists():
        raise Unavailable("the probe issues x86_64 syscall numbers through python3")
    table = seccomp.SYSCALLS["x86_64"]
    names = ["bpf", "perf_event_open", "userfaultfd", "keyctl", "ptrace", "mount", "io_uring_setup", "init_module", "setns"]
    probe = ("import ctypes, errno; l = ctypes.CDLL(None, use_errno=True)\n"
             f"for n, nr in {[(n, table[n]) for n in names]!r}:\n"
             "    r = l.syscall(nr, 0, 0, 0, 0, 0); print(n, r, errno.errorcode.get(ctypes.get_errno()))\n")
    with box(tmp) as b:
        (b.work / "probe.py").write_text(probe)
        out = b.bash("python3 probe.py")
        got = {line.split()[0]: line.split()[2] for line in out.splitlines() if len(line.split()) == 3}
        held(got == {n: "EPERM" for n in names}, f"not all refused: {out!r}")
        return f"{len(names)} calls refused with EPERM"


# ---- the disk ------------------------------------------------------------------------------------
def _disk_bytes(work: Path) -> int:
    """Blocks work/ takes on disk outside dataroom/, each inode once (hard links share theirs)."""
    seen: dict[int, int] = {}
    for dirpath, dirs, names in os.walk(work):
        dirs[:] = [d for d in dirs if not (Path(dirpath) == work and d == "dataroom")]
        for n in names:
            st = os.lstat(os.path.join(dirpath, n))
            seen[st.st_ino] = st.st_blocks * 512
    return sum(seen.values())


@attempt("box", "one bash call writes 2 x 600 MB files (the per-file cap is 512 MB; the run's quota 1 GiB)")
def disk_quota_bytes(tmp: Path) -> str:
    from searchbox.tools.sandbox import limits_for

    with box(tmp, bash_timeout_s=60) as b:
        quota = limits_for(b.tools.ctx.harness).work_bytes
        out = b.call("bash", command="for i in 1 2; do head -c 600M /dev/zero > big$i; done; ls -l big* | wc -l", timeout=60)
        used = _disk_bytes(b.work)
        held(used <= quota, f"work/ holds {used >> 20} MiB on disk, past the {quota >> 20} MiB quota")
        held(not out.ok and "work/ is full" in out.error, f"no tool error for the model: {out.output[:300]!r}")
        return f"{used >> 20} MiB kept of {quota >> 20} MiB; the model read: {out.error.splitlines()[0][:80]}"


@attempt("box", "create 30,000 empty files (a million went through: every later call cost 3.7 s more)")
def disk_quota_inodes(tmp: Path) -> str:
    from searchbox.tools.sandbox import limits_for

    with box(tmp, bash_timeout_s=60) as b:
        files = limits_for(b.tools.ctx.harness).work_files
        out = b.call("bash", command="mkdir m && cd m && for i in $(seq 30000); do : > e$i || break; done 2>/dev/null; ls | wc -l", timeout=60)
        made = sum(1 for _ in (b.work / "m").iterdir())
        held(made < files, f"{made} files kept, quota {files}")
        held(not out.ok and "limit on files" in out.error, f"no tool error for the model: {out.output[:300]!r}")
        start = time.monotonic()
        b.bash("true")
        return f"{made} files kept (quota {files}); the next call took {time.monotonic() - start:.1f}s"


@attempt("box", "multiply disk use outside the tmpfs: 300 hard links and 50 sparse 500 MB files")
def disk_quota_links_and_holes(tmp: Path) -> str:
    with box(tmp) as b:
        b.bash("head -c 50M /dev/zero > base; mkdir -p l; for i in $(seq 300); do mkdir -p l/$i; ln base l/$i/x; done; "
               "for i in $(seq 50); do truncate -s 500M s$i; done", timeout=60)
        used = _disk_bytes(b.work)
        held(used < 200 * 1024**2, f"work/ takes {used >> 20} MiB on disk")
        held((b.work / "l" / "7" / "x").stat().st_nlink == 301, "hard links became copies")
        return f"links stay links, holes stay holes: {used >> 20} MiB on disk"


# ---- paths the harness cannot choke on -----------------------------------------------------------
@attempt("box", "30 nested 200-character folders in work/, then --overwrite (make_writable, rmtree), listing, reuse")
def deep_tree(tmp: Path) -> str:
    from searchbox.corpus import safefs
    from searchbox.corpus.dataroom import make_writable, open_workspace, remove_tree

    with box(tmp) as b:
        name = "d" * 200
        b.bash(f"for i in $(seq 30); do mkdir {name} && cd {name}; done; echo deep > bottom.txt; "
               "touch $'bad-\\xff-name.md'; chmod 500 .")
        listing = safefs.list_files(b.work)
        deepest = max((len(p) for p, _ in listing.files), default=0)
        held(deepest > 6000, f"the deep file was not listed ({deepest} characters at most)")
        found = b.call("find", pattern="bottom.txt")
        held(found.ok and "bottom.txt" in found.output, f"find missed it: {found.output[:200]!r}")
        make_writable(b.ws.run_dir)  # what searchbox.run --overwrite and a sweep relaunch do
        open_workspace(b.ws.run_dir, None)  # the run dir reused
        b.bash(f"for i in $(seq 30); do mkdir -p {name} && cd {name}; done; chmod 000 .")  # again, after the reuse
        remove_tree(b.ws.run_dir)  # the harness's own removal, whatever the modes
        held(not b.ws.run_dir.exists(), "the run dir could not be removed")
        return f"listed ({deepest}-character path), made writable, reused and removed"


# ---- arguments exec cannot carry -----------------------------------------------------------------
@attempt("box", "a NUL byte, a lone surrogate and 200 KB in a bash command, grep pattern and glob (exec refuses them)")
def exec_refusals(tmp: Path) -> str:
    from searchbox.tools import builtins
    from searchbox.tools.context import InvalidCall

    with box(tmp) as b:
        ctx = b.tools.ctx
        cases = [(builtins.bash, (ctx, "echo a\x00b")), (builtins.bash, (ctx, "echo " + "x" * 200_000)),
                 (builtins.bash, (ctx, "echo \ud83d")), (builtins.find, (ctx, "[a" * 70_000)),
                 (builtins.grep, (ctx, "x", ".", "[a" * 70_000)), (builtins.read, (ctx, "\ud83d.txt"))]
        if shutil.which("rg"):  # ripgrep takes the pattern through exec (the fallback grep takes it through a pipe)
            cases += [(builtins.grep, (ctx, "a\x00b", ".")), (builtins.grep, (ctx, "x" * 200_000, ".")),
                      (builtins.grep, (ctx, "\ud83d", "."))]
        for fn, args in cases:
            try:
                fn(*args)
            except InvalidCall:
                continue
            raise Breach(f"{fn.__name__} ran {str(args[1])[:40]!r}")
        held(b.bash("echo still fine").strip() == "still fine", "the box broke after the refusals")
        return f"{len(cases)} calls refused as malformed before exec, the box still works"
