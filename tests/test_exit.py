"""errors.exit_process: a command's status, its exit handlers and its output survive the os._exit that skips the native
teardown (where pyarrow's pools aborted finished sweeps with exit 134)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAM = """
import atexit, sys
from pathlib import Path
from searchbox.errors import exit_process
atexit.register(lambda: Path(sys.argv[2]).write_text("handler ran"))
import pyarrow as pa, pyarrow.parquet as pq  # the pools that raced at teardown
pq.write_table(pa.table({"x": list(range(1000))}), sys.argv[2] + ".parquet")
def main():
    print("partial line without newline", end="")
    kind = sys.argv[1]
    if kind == "int":
        return 3
    if kind == "none":
        return None
    if kind == "message":
        sys.exit("searchbox: one line")
    if kind == "interrupt":
        raise KeyboardInterrupt
exit_process(main)
"""


@pytest.mark.parametrize("kind, code, err", [("int", 3, ""), ("none", 0, ""), ("message", 1, "searchbox: one line"),
                                             ("interrupt", 130, "")])
def test_exit_process_keeps_status_handlers_and_output(tmp_path, kind, code, err):
    mark = tmp_path / "mark"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, kind, str(mark)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "partial line without newline"  # flushed before os._exit
    assert err in proc.stderr and "Traceback" not in proc.stderr
    assert mark.read_text() == "handler ran"  # atexit handlers (logging, temp folders, Ray) still run


def test_exit_process_stops_a_process_pool_as_a_normal_exit_does(tmp_path):
    """The threading exit hooks run before the atexit handlers, as at a normal exit: without them joblib's atexit waited on
    a loky executor nobody had told to stop, and a joblib sweep hung 300 s (its workers' idle timeout) after its work."""
    import time

    code = """
from joblib import Parallel, delayed
from searchbox.errors import exit_process
def main():
    assert Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(4)) == [0, 1, 2, 3]
    return 0
exit_process(main)
"""
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t < 100, "the process pool held the exit"  # 300 s when it hangs; a few seconds otherwise
