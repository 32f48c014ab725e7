"""The long-lived box (tools/longbox.py) that Pi lives in for a whole run, with bash standing in for Pi."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from searchbox.tools import longbox, sandbox
from searchbox.tools.sandbox import bwrap_works

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap unavailable (apt-get install bubblewrap)")


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "run" / "work"
    (work / "dataroom").mkdir(parents=True)
    (work / "dataroom" / "a.md").write_text("Gannet Rock is 38.4 metres tall.\n")
    (work / "notes.md").write_text("a note from an earlier turn\n")
    return work


def _start(work: Path, script: str, limits: sandbox.Limits, **kw) -> longbox.LongBox:
    return longbox.start_box(["bash", "-c", script], work, [work / "dataroom"], "bwrap", limits, cpu_s=120,
                             private={"state": "/state"}, private_disk=work.parent / "pi", hidden=(".pi",), **kw)


def _line(box: longbox.LongBox) -> str:
    return box.proc.stdout.readline().decode().rstrip("\n")


def _pids(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [p for p in out if p != str(os.getpid())]


@needs_bwrap
def test_a_long_box_keeps_work_on_its_quota_until_persisted_and_leaves_nothing_running(tmp_path):
    work = _work(tmp_path)
    script = ("echo $PWD $(id -u) $HOME $FOO; cat notes.md; cat /state/seeded; "
              "touch .pi/x 2>/dev/null && echo wrote-pi || echo pi-read-only; ls -A .pi | wc -l; "
              "echo hidden > /state/mine; cat /etc/shadow 2>/dev/null || echo no-shadow; "
              "read line; echo \"$line\" > made.txt; setsid sleep 4242 & echo ready; read again; echo bye")
    box = _start(work, script, sandbox.Limits(work_bytes=32 * 1024**2, work_files=500), env={"FOO": "bar"},
                 seed={"state": {"seeded": b"from the checkpoint\n"}})
    try:
        assert _line(box) == "/work 65534 /work bar"  # work/ at one path in the box, whatever the run dir is called
        assert _line(box) == "a note from an earlier turn" and _line(box) == "from the checkpoint"
        assert _line(box) == "pi-read-only" and _line(box) == "0"  # Pi's project config folder: empty and read-only
        assert _line(box) == "no-shadow"
        box.proc.stdin.write(b"written in the box\n")
        box.proc.stdin.flush()
        assert _line(box) == "ready"
        assert (box.work_view / "made.txt").read_text() == "written in the box\n"  # the harness sees the box's work/ live
        assert not (work / "made.txt").exists()  # disk holds the last persisted copy
        assert (box.private_views["state"] / "mine").read_text() == "hidden\n"
        assert box.persist() == "" and (work / "made.txt").read_text() == "written in the box\n"
        assert _pids("sleep 4242")  # a background process lives while the box does
    finally:
        box.close()
    assert not _pids("sleep 4242"), "a process outlived the box"
    assert box.work_view == work and box.private_views == {}
    assert sorted(p.name for p in work.iterdir()) == ["dataroom", "made.txt", "notes.md"]  # the hidden .pi is never copied out


@needs_bwrap
def test_a_long_box_without_quota_binds_work_from_disk(tmp_path):
    work = _work(tmp_path)
    box = _start(work, "echo made > made.txt; echo x > /state/s; echo done; read x", sandbox.Limits(work_bytes=0))
    try:
        assert _line(box) == "done"
        assert box.work_view == work and (work / "made.txt").read_text() == "made\n"
        assert (work.parent / "pi" / "state" / "s").read_text() == "x\n"
    finally:
        box.close()


@needs_bwrap
def test_a_long_box_holds_its_quota_across_work_and_private_folders(tmp_path):
    work = _work(tmp_path)
    script = ("dd if=/dev/zero of=big bs=1M count=6 2>/dev/null; dd if=/dev/zero of=/state/big bs=1M count=6 2>&1 | head -1; "
              "echo done; read x")
    box = _start(work, script, sandbox.Limits(work_bytes=8 * 1024**2, work_files=500))
    try:
        said = _line(box)
        assert "No space left on device" in said, said
        assert _line(box) == "done"
    finally:
        note = box.close()
    assert "work/ is full" in note


@needs_bwrap
def test_the_watchdog_kills_a_hungry_command_and_spares_the_long_lived_process(tmp_path):
    work = _work(tmp_path)
    script = ("python3 -c 'import time; x = bytearray(300 * 1024**2); time.sleep(60)' ; echo \"child ended $?\"; "
              "read x; echo still-here")
    box = _start(work, script, sandbox.Limits(work_bytes=0, box_memory_bytes=200 * 1024**2))
    try:
        assert _line(box) == "child ended 137"  # SIGKILL: the command, not the box
        box.proc.stdin.write(b"go\n")
        box.proc.stdin.flush()
        assert _line(box) == "still-here"
        assert box.killed and "killed" in box.killed[0]
    finally:
        box.close()


def test_wrap_keeps_the_per_call_box_as_it_was(tmp_path):
    """The long box's options default off: a bash call's argv is what it was (work/ at its own path, HOME there)."""
    work = _work(tmp_path)
    full, fds = sandbox.wrap(["true"], work, [work / "dataroom"], "bwrap" if bwrap_works() else "none")
    argv = _bwrap_args(full) if bwrap_works() else full
    for fd in fds:
        os.close(fd)
    if bwrap_works():
        assert full[:4] == ["bwrap", "--args", full[2], "--"]  # host paths go through a descriptor, not pid 1's command line
        assert str(work.resolve()) not in " ".join(full)
        real = str(work.resolve())
        assert argv[argv.index("--chdir") + 1] == real
        assert argv[argv.index("HOME") - 1: argv.index("HOME") + 2] == ["--setenv", "HOME", real]
        assert ["--bind", real, real] == argv[argv.index(real) - 1: argv.index(real) + 2]


def _bwrap_args(full: list[str]) -> list[str]:
    """The options bwrap reads from its --args descriptor (NUL-separated), as one argv."""
    fd = int(full[full.index("--args") + 1])
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 1 << 20):
        data += chunk
    return [os.fsdecode(a) for a in data.split(b"\0")[:-1]] + full[3:]
