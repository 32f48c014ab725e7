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
    from searchbox.corpus.dataroom import make_writable
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

    assert builtins.bash(toolset.ctx, ": " + "x" * 131_000 + "; echo fine").text.strip() == "fine"


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


# ---- the quota on work/ -----------------------------------------------------------------------
def _quota_toolset(work, mb: int = 32, files: int = 500):
    from searchbox.config import HarnessConfig
    from searchbox.tools import ToolContext, Toolset, select

    harness = HarnessConfig(bash_timeout_s=30, output_cap_chars=4000, work_quota_mb=mb, work_quota_files=files)
    return Toolset(select("none"), ToolContext(work=work, harness=harness, sandbox_mode="bwrap"))


def _disk_bytes(work: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in work.rglob("*") if not p.is_relative_to(work / "dataroom"))


@needs_bwrap
def test_quota_holds_bytes_across_files(work):
    """Issue 20: one call wrote six 600 MB files (3.0 GiB in 12 s): the cap was per file. Scaled down: 6 x 20 MB into 32 MiB."""
    ts = _quota_toolset(work, mb=32)
    out = ts.call("bash", {"command": "for i in 1 2 3 4 5 6; do head -c 20M /dev/zero > big$i; done; echo done"})
    assert not out.ok and "work/ is full" in out.error and "limit on bytes" in out.error, out.output
    assert "No space left on device" in out.output and "done" in out.output
    assert _disk_bytes(work) <= 32 * 1024**2
    out = ts.call("bash", {"command": "rm big*; head -c 1M /dev/zero > small && echo fits"})  # room again once removed
    assert out.ok and "fits" in out.output and not list(work.glob("big*"))


@needs_bwrap
def test_quota_holds_inodes(work):
    """Issue 20: a million empty files were accepted and every later call cost 3.7 s more. Scaled down: 2,000 into 500."""
    ts = _quota_toolset(work, files=500)
    out = ts.call("bash", {"command": "mkdir many; for i in $(seq 2000); do : > many/e$i || break; done; echo made $(ls many | wc -l)"})
    assert not out.ok and "limit on files" in out.error, out.output
    made = int(out.output.split("made ")[1].split()[0])
    assert made < 500 and len(list((work / "many").iterdir())) == made
    out = ts.call("bash", {"command": "ls many | wc -l"})  # the next call sees them all, and says nothing new filled it
    assert out.ok and out.output.strip() == str(made)


@needs_bwrap
def test_what_the_model_makes_survives_between_calls(work):
    ts = _quota_toolset(work, mb=256)
    script = ("echo one > a.txt; chmod 640 a.txt; mkdir -p d/e; echo two > d/e/b.txt; ln a.txt d/hard.txt; "
              "ln -s /etc/passwd d/link; ln -s a.txt rel-link; mkfifo d/pipe; truncate -s 200M sparse.bin; "
              "echo tail >> sparse.bin; mkdir locked; echo in > locked/x; chmod 000 locked/x; chmod 500 locked; "
              "touch -d 2001-02-03 a.txt; echo gone > gone.txt")
    assert ts.call("bash", {"command": script}).ok
    assert (work / "d" / "e" / "b.txt").read_text() == "two\n"
    assert stat_mode(work / "a.txt") == 0o640 and (work / "a.txt").stat().st_mtime < 1e9 + 2e7
    assert (work / "a.txt").stat().st_ino == (work / "d" / "hard.txt").stat().st_ino  # a hard link, not a copy
    assert os_readlink(work / "d" / "link") == "/etc/passwd" and os_readlink(work / "rel-link") == "a.txt"
    assert (work / "d" / "pipe").is_fifo()
    sparse = (work / "sparse.bin").stat()
    assert sparse.st_size == 200 * 1024**2 + 5 and sparse.st_blocks * 512 < 1024**2  # holes stay holes on disk
    assert stat_mode(work / "locked") == 0o500 and stat_mode(work / "locked" / "x") == 0
    out = ts.call("bash", {"command": "rm gone.txt; cat a.txt d/e/b.txt locked/x 2>&1; stat -c %a locked locked/x; "
                                      "tail -c 5 sparse.bin; stat -c %h a.txt; rm -r d/e; echo file > d/e"})
    assert out.ok and out.output.splitlines()[:2] == ["one", "two"]
    assert "500" in out.output and "tail" in out.output
    assert not (work / "gone.txt").exists() and (work / "d" / "e").read_text() == "file\n"  # a folder became a file
    assert (work / "dataroom" / "a.txt").read_text() == "hello\n"  # the dataroom is never copied nor touched


@needs_bwrap
def test_files_the_harness_wrote_past_the_quota_leave_bash_usable(work):
    """write/edit and delivered results land on disk between calls: a work/ past the quota still gets a box (no
    room to grow), so the model can clean up."""
    ts = _quota_toolset(work, mb=8)
    for i in range(12):
        assert ts.call("write", {"path": f"w{i:02d}.txt", "content": "x" * 900_000}).ok  # 10.8 MB in all: past 8 MiB
    out = ts.call("bash", {"command": "ls w*.txt | wc -l; head -c 1M /dev/zero > more 2>/dev/null || echo no room; "
                                      "rm w0*.txt; echo cleaned"})
    assert out.ok and out.output.split("\n")[:3] == ["12", "no room", "cleaned"], out.output
    assert sorted(p.name for p in work.glob("w*")) == ["w10.txt", "w11.txt"]


@needs_bwrap
def test_quota_is_the_box_s_work_and_can_be_turned_off(work):
    assert sandbox.quota_failure() == ""
    fs = _quota_toolset(work).call("bash", {"command": "df -P . | tail -1 | cut -d' ' -f1"})
    assert fs.output.strip() == "searchbox-work"
    fs = _quota_toolset(work, mb=0).call("bash", {"command": "df -P . | tail -1 | cut -d' ' -f1"})
    assert fs.output.strip() != "searchbox-work"


def test_quota_in_the_run_record():
    from searchbox.config import HarnessConfig

    assert sandbox.quota_record(HarnessConfig(), "bwrap") == {"work_bytes": 1024**3, "work_files": 20_000}
    assert sandbox.quota_record(HarnessConfig(work_quota_mb=64, work_quota_files=10), "bwrap") == {"work_bytes": 64 * 1024**2, "work_files": 10}
    assert sandbox.quota_record(HarnessConfig(work_quota_mb=0), "bwrap") == {}
    assert sandbox.quota_record(HarnessConfig(), "none") == {}


def test_negative_quota_is_a_config_error():
    from searchbox.config import HarnessConfig, RunConfig
    from searchbox.errors import ConfigError

    with pytest.raises(ConfigError, match="work_quota"):
        RunConfig(harness=HarnessConfig(work_quota_mb=-1)).validate()


def stat_mode(path: Path) -> int:
    import os
    import stat as st

    return st.S_IMODE(os.lstat(path).st_mode)


def os_readlink(path: Path) -> str:
    import os

    return os.readlink(path)


def test_a_run_records_its_quota(tmp_path):
    """run_meta says which quota the box's work/ had (the record, not only the config, so a table can show it)."""
    from tests.conftest import make_cfg, run_script

    meta, _, _ = run_script(tmp_path, [{"content": "x"}], cfg=make_cfg(work_quota_mb=64, work_quota_files=500))
    expected = {"work_bytes": 64 * 1024**2, "work_files": 500} if meta["sandbox"] != "none" else {}
    assert meta["sandbox_quota"] == expected


@needs_bwrap
def test_a_tree_work_cannot_keep_is_reported_to_the_model(work):
    """Issue 36 part 4: a 140-level folder the agent made in work/ (far under PATH_MAX) was silently gone at the next
    call. The call that made it now reads why it is not kept, as the quota's note; the next call says nothing new."""
    ts = _quota_toolset(work, mb=64, files=2000)
    out = ts.call("bash", {"command": "p=.; for i in $(seq 140); do p=$p/d; done; mkdir -p $p && echo deep > $p/x && echo made"})
    assert not out.ok and "made" in out.output
    assert "could not keep 1 of the entries" in out.output and "deeper than 128 folders" in out.output, out.output
    assert "/".join(["d"] * 129) in out.output  # names the first folder it left out
    depth = ts.call("bash", {"command": "p=.; n=0; while [ -d $p/d ]; do p=$p/d; n=$((n+1)); done; echo $n"})
    assert depth.ok and depth.output.strip() == "128"  # what it kept, kept; and this call made nothing to report


@needs_bwrap
@pytest.mark.parametrize("mb", [0, 64])
def test_a_box_with_work_at_a_fixed_path_shows_no_host_path(tmp_path, mb):
    """Issue 36: /proc/1/cmdline in the box showed the host paths of the run folder, $SEARCHBOX_HOME and the checkout
    (bwrap's binds). Now bwrap reads its options from a descriptor and, given `inside`, work/ is at that path only."""
    work = tmp_path / "HOSTMARK-run" / "work"
    (work / "dataroom").mkdir(parents=True)
    (work / "dataroom" / "a.md").write_text("Gannet Rock\n")
    script = ("pwd; echo $HOME; cat dataroom/a.md; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; "
              "tr '\\0' ' ' < $p/environ 2>/dev/null; readlink $p/cwd $p/root 2>/dev/null; done; echo x > made.txt")
    res = sandbox.run_shell(script, work, [work / "dataroom"], "bwrap", 30, 1 << 20, sandbox.Limits(work_bytes=mb << 20, work_files=500),
                            inside="/work")
    lines = res.output.splitlines()
    assert lines[:3] == ["/work", "/work", "Gannet Rock"], res.output
    assert "HOSTMARK" not in res.output and str(tmp_path) not in res.output, res.output
    assert "bwrap --info-fd" in res.output and " --args " in res.output  # pid 1 is there, its options out of sight
    assert (work / "made.txt").read_text() == "x\n"


def _shared_copy_box(tmp_path):
    from searchbox.corpus.dataroom import Mount

    shared = tmp_path / "HOSTMARK-home" / "corpora" / "c0ffee" / "tree"
    (shared / "sub").mkdir(parents=True)
    (shared / "sub" / "a.md").write_text("Gannet Rock\n")
    shared.chmod(0o755)
    work = tmp_path / "HOSTMARK-run" / "work"
    (work / "dataroom").mkdir(parents=True)
    return work, Mount(work / "dataroom", shared), shared


MOUNT_SCRIPT = ("cat dataroom/sub/a.md; for p in self 1; do cat /proc/$p/mountinfo /proc/$p/mounts /proc/$p/mountstats; done; "
                "touch dataroom/x 2>&1 || echo REFUSED; echo y > made.txt")


@needs_bwrap
def test_the_box_names_no_host_path_of_the_shared_copy_in_its_mount_table(tmp_path):
    """Issue 36: /proc/self/mountinfo in the box named the shared corpus copy's host path ($SEARCHBOX_HOME, the
    corpus's identity): a bind mount's root is its source's path. With the work/ quota, dataroom/ is an overlay the
    quota wrapper mounts, its layers named by descriptor: the table names no host path, dataroom/ reads and refuses
    writes, and work/ still keeps what the call wrote."""
    work, mount, shared = _shared_copy_box(tmp_path)
    res = sandbox.run_shell(MOUNT_SCRIPT, work, [mount], "bwrap", 30, 1 << 20,
                            sandbox.Limits(work_bytes=64 << 20, work_files=500), inside="/work")
    assert res.output.startswith("Gannet Rock\n") and "REFUSED" in res.output, res.output
    assert "HOSTMARK" not in res.output and str(tmp_path) not in res.output, res.output
    assert "overlay searchbox-ro ro," in res.output and "lowerdir=/proc/self/fd/" in res.output, res.output
    assert (work / "made.txt").read_text() == "y\n" and not (shared / "x").exists()
    assert list((work / "dataroom").iterdir()) == []  # the mount point on disk stays empty


@needs_bwrap
def test_without_overlayfs_the_shared_copy_is_still_bound_read_only(tmp_path, monkeypatch):
    """Where overlayfs cannot be mounted, the wrapper binds the shared copy read-only instead (the table then names
    its source, as docs/box.md says): the box still reads it and cannot write it."""
    from searchbox.tools import boxwork

    monkeypatch.setattr(boxwork, "WRAPPER", boxwork.WRAPPER.replace('b"overlay"', 'b"no-such-filesystem"'))
    work, mount, shared = _shared_copy_box(tmp_path)
    res = sandbox.run_shell(MOUNT_SCRIPT, work, [mount], "bwrap", 30, 1 << 20,
                            sandbox.Limits(work_bytes=64 << 20, work_files=500), inside="/work")
    assert res.output.startswith("Gannet Rock\n") and "REFUSED" in res.output, res.output
    assert "overlay searchbox-ro" not in res.output and "c0ffee" in res.output, res.output
    assert (work / "made.txt").read_text() == "y\n" and not (shared / "x").exists()


def test_absolute_paths_under_the_fixed_path_are_work_s_own(tmp_path):
    from searchbox.config import HarnessConfig
    from searchbox.tools import ToolContext, builtins
    from searchbox.tools.context import ToolError

    ctx = ToolContext(work=tmp_path, harness=HarnessConfig(), inside="/work")
    assert builtins._parts(ctx, "/work/notes/a.md") == ("notes", "a.md") and builtins._parts(ctx, "/work") == ()
    with pytest.raises(ToolError):
        builtins._parts(ctx, f"{tmp_path}/a.md")  # the host path means nothing in the box
