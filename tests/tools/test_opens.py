"""The issue's fooling cases (29.2) against the kernel's record of opens: only a command that read the gold file shows it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from searchbox.tools.opens import dataroom_reads, tracer_argv

CASES = {  # command -> read the gold file?
    "cat dataroom/gold.md": True,
    "fold -w 40 dataroom/gold.md | tr a-z A-Z": True,
    "cd dataroom && echo RGFuYSBXaGl0ZmllbGQ= | base64 -d": False,
    "ls dataroom; echo Dana Whitfield": False,
    "python3 -c 'import os, base64; os.listdir(\"dataroom\"); print(base64.b64decode(\"RGFuYQ==\"))'": False,
}


def _traced(tmp_path, command: str) -> list[str]:
    room = tmp_path / "room"
    room.mkdir(exist_ok=True)
    (room / "gold.md").write_text("Curator: Dana Whitfield, head of the maritime collection.\n")
    log = tmp_path / "opens.log"
    box = ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/mnt", "--ro-bind", str(room), "/mnt/dataroom", "--unshare-pid",
           "--dev", "/dev", "--proc", "/proc", "--chdir", "/mnt", "bash", "-c", command]
    subprocess.run([*tracer_argv(str(log)), *box], capture_output=True, timeout=60, check=False)
    return dataroom_reads(log.read_text(errors="replace"), "/mnt/dataroom")


@pytest.mark.skipif(not (shutil.which("strace") and shutil.which("bwrap")), reason="needs strace and bubblewrap")
@pytest.mark.parametrize("command", CASES)
def test_only_a_read_of_the_gold_file_is_observed(tmp_path, command):
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("bubblewrap does not work here")
    assert (_traced(tmp_path, command) == ["gold.md"]) is CASES[command], command


def test_directory_and_path_opens_are_no_reads():
    log = ('7 openat(AT_FDCWD</mnt>, "dataroom", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3</mnt/dataroom>\n'
           '8 openat(AT_FDCWD, "/newroot/mnt/dataroom", O_RDONLY|O_CLOEXEC|O_PATH) = 5</newroot/mnt/dataroom>\n'
           '9 openat(AT_FDCWD</mnt>, "dataroom/a/b.md", O_RDONLY) = 3</mnt/dataroom/a/b.md>\n'
           '9 openat(AT_FDCWD</mnt>, "notes.md", O_RDONLY) = 3</mnt/notes.md>\n')
    assert dataroom_reads(log, "/mnt/dataroom") == ["a/b.md"]
