"""Pi installed like everything else: the committed pin, `npm ci` at setup only, and a clear refusal without it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from searchbox import harness as harnesses
from searchbox.errors import SetupError
from searchbox.harness.pi import install
from tests.conftest import make_cfg

def _node_ok() -> bool:
    try:
        install.find_node()
        return True
    except SetupError:
        return False


needs_node = pytest.mark.skipif(not _node_ok(), reason=f"Node.js >= {'.'.join(map(str, install.MIN_NODE))} not on PATH")


def _fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_the_pin_is_one_exact_version_in_a_committed_lockfile():
    package = json.loads((install.NODE_DIR / "package.json").read_text())
    lock = json.loads((install.NODE_DIR / "package-lock.json").read_text())
    assert package["dependencies"] == {install.PACKAGE: install.pinned_version()}  # exact, no range
    assert lock["packages"][""]["dependencies"][install.PACKAGE] == install.pinned_version()
    assert all("integrity" in entry for name, entry in lock["packages"].items() if name)  # npm ci checks every tarball
    assert install.install_dir().name == install.lock_sha256()[:16]


def test_without_pi_harness_pi_fails_before_any_run_with_the_fix(tmp_path):
    from searchbox.run.runner import execute

    cfg = make_cfg(kind="pi")
    if shutil.which("node") is None:
        with pytest.raises(SetupError, match="Node.js"):
            harnesses.load("pi").check(cfg)
        return
    with pytest.raises(SetupError, match=r"python -m searchbox setup"):
        execute(cfg, "How tall is Gannet Rock?", None, tmp_path / "run", "http://127.0.0.1:9")
    assert not (tmp_path / "run").exists()  # refused before anything was written
    bad = subprocess.run([sys.executable, "-m", "searchbox.run", "q?", "--harness", "pi", "--tools", "none", "--out", str(tmp_path / "cli"),
                          "--endpoint", "http://127.0.0.1:9"], capture_output=True, text=True, timeout=300, env={**os.environ})
    assert bad.returncode != 0 and "python -m searchbox setup" in bad.stderr and not (tmp_path / "cli").exists()
    assert len(bad.stderr.strip().splitlines()) == 1  # one line for a person


def test_the_controls_run_under_the_native_harness_only():
    cfg = make_cfg(kind="pi")
    cfg.model.policy = "keyword"
    with pytest.raises(Exception, match="harness=native"):
        harnesses.load("pi").check(cfg)


@needs_node
def test_setup_runs_npm_ci_on_the_pin_once(tmp_path, monkeypatch):
    """ensure_pi (what `python -m searchbox setup` calls) installs with `npm ci` on the lockfile, no scripts, and a
    second call finds the install without npm: runs never fetch."""
    calls = tmp_path / "npm-calls"
    version = install.pinned_version()
    _fake(tmp_path / "bin", "npm", f"""echo "$@" >> {calls}
test -f package-lock.json || exit 9
mkdir -p node_modules/@mariozechner/pi-coding-agent/dist
echo '{{"name": "@mariozechner/pi-coding-agent", "version": "{version}"}}' > node_modules/@mariozechner/pi-coding-agent/package.json
""")
    node = os.path.dirname(os.path.realpath(shutil.which("node")))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{node}:/usr/bin:/bin")
    assert install.find_pi() is None
    pi = install.ensure_pi()
    assert pi.version == version and pi.root == install.install_dir().resolve()
    assert stat.S_IMODE(pi.root.stat().st_mode) == 0o755  # the box's uid reads Pi's modules
    args = calls.read_text().split()
    assert args[0] == "ci" and "--ignore-scripts" in args and "--omit=dev" in args
    assert install.ensure_pi() == pi and len(calls.read_text().splitlines()) == 1  # installed: npm not run again
    assert not [p for p in pi.root.parent.iterdir() if p.name.startswith(".installing-")]


@needs_node
def test_a_failed_npm_leaves_nothing_half_installed(tmp_path, monkeypatch):
    _fake(tmp_path / "bin", "npm", "echo 'npm ERR! network unreachable' >&2; exit 1\n")
    node = os.path.dirname(os.path.realpath(shutil.which("node")))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{node}:/usr/bin:/bin")
    with pytest.raises(SetupError, match="network unreachable"):
        install.ensure_pi()
    assert install.find_pi() is None and not install.install_dir().exists()


def test_an_old_node_is_refused_with_what_to_install(tmp_path, monkeypatch):
    _fake(tmp_path / "bin", "node", "echo v18.20.4\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(SetupError, match=r"Node.js >= 20\.6.*v18\.20\.4"):
        install.require_pi()
    assert install.parse_version("v20.6.0") == (20, 6, 0) and install.parse_version("junk") == (0,)


def test_doctor_shows_pi(tmp_path):
    out = subprocess.run([sys.executable, "-m", "searchbox", "doctor", "--only", "pi"], capture_output=True, text=True, timeout=300)
    assert "pi (harness=pi)" in out.stdout and ("python -m searchbox setup" in out.stdout or " ok " in out.stdout)
