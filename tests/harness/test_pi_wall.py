"""Pi behind its own wall (issue 36 part 1): how a dead Pi is named, and the Pi attempts of the hostile battery
run by a normal user (the issue's battery ran the harness as one; as root the box drops to uid 65534 itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from searchbox.harness.pi.loop import why_gone
from searchbox.run.runner import execute
from tests.conftest import trace
from tests.harness.test_pi import QUESTION, PiServer, pi, pi_cfg  # noqa: F401 (pi: the fixture)
from tests.hostile_attempts import Unavailable
from tests.hostile_pi import probe  # at import: it reads the real SEARCHBOX_HOME before a test isolates it

NODE = "v20.20.2"
ROOT = Path(__file__).resolve().parents[2]


def test_a_dead_pi_is_named_by_its_own_last_error_not_nodes_trailer():
    """Issue 36: the stop detail said "Node.js v20.20.2" (Node's last line) or the settings-lock warning; the
    cause (ENOSPC) was only in pi/stderr.log. The extension's JSON line names it."""
    stderr = ("Warning: (runtime creation, global settings) EROFS: read-only file system, mkdir '/searchbox/agent/settings.json.lock'\n"
              '\n{"searchbox_pi_error": {"origin": "uncaughtException", "name": "Error", "code": "ENOSPC", '
              '"message": "ENOSPC: no space left on device, write"}}\n'
              "node:internal/fs/utils:351\n    throw err;\n    ^\n\nError: ENOSPC: no space left on device, write\n\nNode.js v20.20.2\n")
    assert why_gone(stderr, 1, NODE) == "Error [ENOSPC]: ENOSPC: no space left on device, write (uncaughtException)"
    # No record (killed, or a native abort): the exit or signal, and the last line that is not Node's version.
    assert why_gone("FATAL ERROR: Reached heap limit\nNode.js v20.20.2\n", -6, NODE) == "killed by signal 6: FATAL ERROR: Reached heap limit"
    assert why_gone("", -9, NODE) == "killed by signal 9"
    assert why_gone('{"searchbox_pi_error": [1]}\nNode.js v20.20.2\n', 7, NODE) == 'exit 7: {"searchbox_pi_error": [1]}'


def _as_user_argv(argv: list[str]) -> list[str]:
    """argv as uid 65533 in a mount namespace of its own where root's 0700 home (the interpreter, Pi's install) is
    replaced by a 0755 view holding only what the tests read, bound read-only."""
    keep = [p for p in {os.path.realpath(sys.base_prefix), os.path.realpath(os.path.expanduser("~/.cache/searchbox"))}
            if p.startswith("/root/")]
    script = ["set -e", "stage=$(mktemp -d)"]
    for i, path in enumerate(keep):
        script += [f"mkdir -p $stage/{i}", f"mount --bind {path} $stage/{i}"]
    script += ["mount -t tmpfs -o mode=755 piwall-root /root"]
    for i, path in enumerate(keep):
        script += [f"mkdir -p {path}", f"mount --bind -o ro $stage/{i} {path}"]
    script += ['exec setpriv --reuid=65533 --regid=65533 --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root '
               f'PYTHONDONTWRITEBYTECODE=1 PYTHONPATH={ROOT} LANG=C.UTF-8 "$@"']
    return ["unshare", "-m", "--propagation", "private", "bash", "-c", "\n".join(script), "as-user", *argv]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
                    reason="needs root (to run the battery as another user), unshare and setpriv")
def test_the_pi_attempts_hold_with_the_harness_run_as_a_normal_user(tmp_path):
    try:
        probe()  # Pi and bubblewrap here at all (the same probe the root run of the battery uses)
    except Unavailable as exc:
        pytest.skip(str(exc))
    out = subprocess.run(_as_user_argv([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "pi_",
                                        "tests/test_hostile.py"]), cwd=ROOT, capture_output=True, text=True, timeout=900)
    tail = (out.stdout + out.stderr)[-3000:]
    assert out.returncode == 0 and " passed" in tail and "skipped" not in tail.splitlines()[-1], tail


def test_pi_unboxed_serves_its_own_process_tree_only(tmp_path, pi):
    """harness.sandbox=none (the explicit unsafe opt-out): no pid namespace to check, so the channel serves Pi's own
    process and what it started; Pi's cwd is work/ itself, where the tools work."""
    cfg = pi_cfg(budget=1, sandbox="none")
    cfg.tools = "none"
    run_dir = tmp_path / "run"
    with PiServer([{"tool_calls": [{"name": "bash", "arguments": {"command": "pwd"}}]}, {"content": "done"}]) as srv:
        meta = execute(cfg, QUESTION, None, run_dir, srv.url)
    assert meta["stop_reason"] == "budget_spent" and meta["sandbox"] == "none", meta["stop_detail"]
    assert meta["harness"]["channel_strangers"] == 0 and meta["llm_calls"] == len(srv.requests) >= 2
    system = next(e["message"]["content"] for e in trace(run_dir) if e["type"] == "message" and e["message"]["role"] == "system")
    assert f"Current working directory: {(run_dir / 'work').resolve()}" in system
