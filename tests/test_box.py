"""The box itself: its seccomp filter (read by a small BPF interpreter and tried from inside), its quota on work/,
and the calls a model's output makes that exec refuses."""

from __future__ import annotations

import errno
import shlex
import struct
import tempfile
from pathlib import Path

import pytest

from searchbox.tools import sandbox, seccomp
from searchbox.tools.sandbox import bwrap_works

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap unavailable (apt-get install bubblewrap)")


# ---- the filter, read instruction by instruction ----------------------------------------------
def _run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What the kernel's classic-BPF seccomp interpreter returns for one call (the few opcodes the filter uses)."""
    words = struct.pack("=iIQ", nr, arch, 0) + b"".join(struct.pack("=Q", a) for a in (*args, *[0] * (6 - len(args))))
    code = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc = struct.unpack_from("=I", words, k)[0]
        elif op == 0x06:
            return k
        elif op in (0x15, 0x35, 0x45):
            hit = acc == k if op == 0x15 else acc >= k if op == 0x35 else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")
        pc += 1


X86 = seccomp.SYSCALLS["x86_64"]
EPERM = seccomp.RET_ERRNO | errno.EPERM


@pytest.mark.parametrize("arch", sorted(seccomp.SYSCALLS))
def test_filter_refuses_the_dangerous_calls_and_passes_the_rest(arch):
    table = seccomp.SYSCALLS[arch]
    prog = seccomp.program(arch)
    audit = table["audit_arch"]
    for name in seccomp.REFUSED:
        if name in table:
            assert _run_bpf(prog, table[name], audit) == EPERM, name
    clone, unshare = table["clone"], table["unshare"]
    assert _run_bpf(prog, clone, audit, (0x01200011,)) == seccomp.RET_ALLOW  # fork() as glibc does it
    assert _run_bpf(prog, clone, audit, (0x003D0F00,)) == seccomp.RET_ALLOW  # pthread_create
    for flag in (0x10000000, 0x00020000, 0x40000000, 0x20000000, 0x00000080):  # NEWUSER, NEWNS, NEWNET, NEWPID, NEWTIME
        assert _run_bpf(prog, clone, audit, (0x11 | flag,)) == EPERM
        assert _run_bpf(prog, unshare, audit, (flag,)) == EPERM
    assert _run_bpf(prog, unshare, audit, (0x400,)) == seccomp.RET_ALLOW  # CLONE_FILES: no namespace
    assert _run_bpf(prog, table["clone3"], audit) == seccomp.RET_ERRNO | errno.ENOSYS  # flags unreadable: libc falls back
    assert _run_bpf(prog, table["personality"], audit, (0xFFFFFFFF,)) == seccomp.RET_ALLOW
    assert _run_bpf(prog, table["personality"], audit, (0x0040000,)) == EPERM  # ADDR_NO_RANDOMIZE
    assert _run_bpf(prog, table["ioctl"], audit, (1, 0x5412)) == EPERM  # TIOCSTI
    assert _run_bpf(prog, table["ioctl"], audit, (1, 0x5401)) == seccomp.RET_ALLOW  # TCGETS
    for ordinary in (0, 1, 2, 3, 59 if arch == "x86_64" else 221):  # read, write, ..., execve
        assert _run_bpf(prog, ordinary, audit) == seccomp.RET_ALLOW
    assert _run_bpf(prog, 0, 0x40000003) == seccomp.RET_KILL_PROCESS  # i386 calls: other numbers, other meanings


def test_x32_calls_on_x86_64_are_killed():
    prog = seccomp.program("x86_64")
    assert _run_bpf(prog, X86["mount"] | 0x40000000, X86["audit_arch"]) == seccomp.RET_KILL_PROCESS


# ---- from inside the box ----------------------------------------------------------------------
@pytest.fixture
def work():
    base = "/var/tmp" if Path("/var/tmp").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="searchbox-box-", dir=base))
    w = root / "work"
    (w / "dataroom").mkdir(parents=True)
    (w / "dataroom" / "a.txt").write_text("hello\n")
    yield w
    from searchbox.dataroom import make_writable
    import shutil

    make_writable(root)
    shutil.rmtree(root, ignore_errors=True)


def _sh(work: Path, command: str, timeout: float = 20):
    return sandbox.run_shell(command, work, [work / "dataroom"], "bwrap", timeout, 100_000)


SYSCALL_PROBE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for name, nr, args in %s:
    ctypes.set_errno(0)
    rc = libc.syscall(nr, *args)
    print(name, rc, __import__("errno").errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
"""


@needs_bwrap
def test_box_has_no_nested_user_namespace_and_the_filter_is_on(work):
    """Issue 20: run as root, the box allowed `unshare -U -r -n -m` (every capability in a nested user namespace)."""
    res = _sh(work, "grep Seccomp: /proc/self/status; unshare -U -r -n -m true; echo rc=$?; unshare -n true; echo rc=$?; "
                    "unshare -U true; echo rc=$?; grep -c . /proc/self/uid_map")
    lines = res.output.splitlines()
    assert lines[0].split() == ["Seccomp:", "2"], res.output
    assert res.output.count("unshare failed: Operation not permitted") == 3, res.output
    assert [line for line in lines if line.startswith("rc=")] == ["rc=1", "rc=1", "rc=1"]


@needs_bwrap
def test_dangerous_calls_fail_inside_the_box(work):
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no python3 in the box to issue raw syscalls")
    calls = [(name, X86[name], args) for name, args in (
        ("mount", (0, 0, 0, 0, 0)), ("bpf", (0, 0, 0)), ("perf_event_open", (0, 0, -1, -1, 0)), ("userfaultfd", (0,)),
        ("keyctl", (0, 0)), ("ptrace", (0, 0, 0, 0)), ("io_uring_setup", (1, 0)), ("setns", (0, 0)),
        ("unshare", (0x10000000,)), ("kexec_load", (0, 0, 0, 0)), ("init_module", (0, 0, 0)),
        ("open_by_handle_at", (0, 0, 0)))]
    if seccomp.platform.machine() != "x86_64":
        pytest.skip("the probe uses x86_64 numbers")
    script = SYSCALL_PROBE % repr(calls)
    res = _sh(work, f"python3 -c {shlex.quote(script)}; echo; python3 -c 'import os; pid = os.fork(); os._exit(0) if pid == 0 else print(\"fork ok\", os.waitpid(pid, 0)[1])'")
    got = {line.split()[0]: line.split()[2] for line in res.output.splitlines() if len(line.split()) == 3 and line.split()[1] == "-1"}
    assert got == {name: "EPERM" for name, _, _ in calls}, res.output
    assert "fork ok 0" in res.output


# ---- a model's output that exec cannot carry --------------------------------------------------
@pytest.fixture
def toolset(work):
    from searchbox.config import HarnessConfig
    from searchbox.tools import ToolContext, Toolset, select

    return Toolset(select("none"), ToolContext(work=work, harness=HarnessConfig(bash_timeout_s=10, output_cap_chars=4000),
                                               sandbox_mode="bwrap"))


BAD_STRINGS = {
    "nul": ("echo a\x00b", "NUL byte"),
    "200 KB": ("echo " + "x" * 200_000, "the most one command line argument can hold is 131071 bytes"),
    "lone surrogate": ("echo \ud83d", "not valid Unicode"),
}


@needs_bwrap
@pytest.mark.parametrize("case", sorted(BAD_STRINGS))
def test_a_command_exec_cannot_carry_is_an_invalid_call(toolset, case):
    """Issue 20: these ended the run as tool_error ('embedded null byte', 'Argument list too long: bwrap', UnicodeEncodeError)."""
    from searchbox.tools import builtins
    from searchbox.tools.context import InvalidCall

    text, message = BAD_STRINGS[case]
    with pytest.raises(InvalidCall, match=message):
        builtins.bash(toolset.ctx, text)
    out = toolset.call("bash", {"command": text})  # through the Toolset (which may refuse it first): the model reads it
    assert not out.ok and out.error


@pytest.mark.skipif(not bwrap_works() or sandbox.shutil.which("rg") is None, reason="needs bubblewrap and ripgrep")
@pytest.mark.parametrize("case", sorted(BAD_STRINGS))
def test_a_grep_pattern_exec_cannot_carry_is_an_invalid_call(toolset, case):
    from searchbox.tools import builtins
    from searchbox.tools.context import InvalidCall

    text, message = BAD_STRINGS[case]
    with pytest.raises(InvalidCall, match=message):
        builtins.grep(toolset.ctx, text.removeprefix("echo "), "dataroom")
    out = toolset.call("grep", {"pattern": text.removeprefix("echo "), "path": "dataroom"})
    assert not out.ok and out.error


@needs_bwrap
def test_a_long_command_under_the_bound_still_runs(toolset):
    from searchbox.tools import builtins

    assert builtins.bash(toolset.ctx, ": " + "x" * 131_000 + "; echo fine").strip() == "fine"


def test_a_huge_glob_and_a_broken_path_are_invalid_calls(toolset):
    """A 140 KB glob of unclosed brackets kept fnmatch busy for minutes; a lone surrogate in a path raised in lstat."""
    from searchbox.tools import builtins
    from searchbox.tools.context import InvalidCall

    with pytest.raises(InvalidCall, match="the most is 4096"):
        builtins.find(toolset.ctx, "[a" * 70_000)
    with pytest.raises(InvalidCall, match="the most is 4096"):
        builtins.grep(toolset.ctx, "hello", ".", glob="[a" * 70_000)
    for tool, args in (("read", {"path": "dataroom/\ud83d.txt"}), ("ls", {"path": "\ud83d"}), ("find", {"pattern": "*", "path": "\ud83d"})):
        with pytest.raises(InvalidCall, match="not valid Unicode"):
            getattr(builtins, tool)(toolset.ctx, **args)
        assert not toolset.call(tool, args).ok
