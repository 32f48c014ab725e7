"""Claude Code's pin (harness/claudecode/install.py): one exact version in a committed lockfile, `npm ci` keeping the
optional platform binary and skipping the postinstall, found without npm afterwards. npm is faked: no network."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from searchbox.errors import SetupError
from searchbox.harness.claudecode import install, launch
from tests.conftest import make_cfg

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js not on PATH")


def _fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text("#!/bin/sh\n" + body)
    (bin_dir / name).chmod(0o755)


def test_the_pin_is_one_exact_version_with_its_platform_binaries_in_the_lockfile():
    package = json.loads((install.NODE_DIR / "package.json").read_text())
    assert package["dependencies"] == {install.PACKAGE: "2.1.332"} == {install.PACKAGE: install.pinned_version()}
    lock = json.loads((install.NODE_DIR / "package-lock.json").read_text())["packages"]
    for platform in install.PLATFORMS:  # each an optional dependency at the same version, resolved with its integrity
        entry = lock[f"node_modules/{install.PACKAGE}-{platform}"]
        assert entry["version"] == "2.1.332" and entry["optional"] and entry["integrity"].startswith("sha512-")
    assert "--omit=optional" not in install.PIN.flags and "--ignore-scripts" in install.PIN.flags


def test_the_run_key_holds_the_pin_the_scripts_the_flags_and_the_task(isolated_home):
    cfg = make_cfg(kind="claude-code")
    ident = launch.identity(cfg)
    assert ident["claude_code"] == "2.1.332" and ident["lock"] == install.lock_sha256()[:16] and len(ident["scripts"]) == 16
    assert ident["flags"][:1] == ["-p"] and "--strict-mcp-config" in ident["flags"] and ident["env"]["DISABLE_TELEMETRY"] == "1"
    assert "ANSWER.md" in ident["task"] and ident["tools"] == [t["name"] for t in ident["channel_tools"]]
    cfg.tools = "high"
    assert launch.identity(cfg)["tools"] != ident["tools"]


@needs_node
def test_setup_runs_npm_ci_keeping_the_platform_binary_once(tmp_path, monkeypatch):
    calls = tmp_path / "npm-calls"
    version = install.pinned_version()
    _fake(tmp_path / "bin", "npm", f"""echo "$@" >> {calls}
test -f package-lock.json || exit 9
mkdir -p node_modules/{install.PACKAGE} node_modules/{install.PACKAGE}-linux-x64
echo '{{"name": "{install.PACKAGE}", "version": "{version}"}}' > node_modules/{install.PACKAGE}/package.json
printf '#!/bin/sh\\necho {version}\\n' > node_modules/{install.PACKAGE}-linux-x64/claude
""")
    node = os.path.dirname(os.path.realpath(shutil.which("node")))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{node}:/usr/bin:/bin")
    assert install.find() is None
    cc = install.ensure()
    assert cc.version == version and cc.binary == install.install_dir().resolve() / "node_modules" / f"{install.PACKAGE}-linux-x64" / "claude"
    args = calls.read_text().split()
    assert args[0] == "ci" and "--ignore-scripts" in args and "--omit=dev" in args and "--omit=optional" not in args
    assert install.ensure() == cc and len(calls.read_text().splitlines()) == 1  # installed: npm not run again
    assert install.require() == cc


@needs_node
def test_an_install_without_a_platform_binary_is_refused_in_one_line(tmp_path, monkeypatch):
    version = install.pinned_version()
    _fake(tmp_path / "bin", "npm", f"""mkdir -p node_modules/{install.PACKAGE}
echo '{{"name": "{install.PACKAGE}", "version": "{version}"}}' > node_modules/{install.PACKAGE}/package.json
""")
    node = os.path.dirname(os.path.realpath(shutil.which("node")))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{node}:/usr/bin:/bin")
    with pytest.raises(SetupError) as err:
        install.ensure()
    assert "no binary for this platform" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SetupError, match="holds no Claude Code binary for this platform"):
        install.require()
