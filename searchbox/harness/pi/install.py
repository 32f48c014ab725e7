"""Pi installed like everything else: a committed lockfile, `npm ci` into $SEARCHBOX_HOME/pi/, nothing fetched at run time.

`python -m searchbox setup` calls `ensure_pi` once; a run only looks the install up (`require_pi`) and refuses,
with the fix, when it is missing. The install folder is named by the lockfile's hash, so a changed pin installs
beside the old one and a half-finished install (no stamp) is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import SetupError
from ...paths import home

PACKAGE = "@mariozechner/pi-coding-agent"
NODE_DIR = Path(__file__).resolve().parent / "node"  # package.json + package-lock.json: the pin
MIN_NODE = (20, 6, 0)  # Pi's engines field
STAMP = ".searchbox-installed"
NPM_TIMEOUT_S = 900.0
FIX = "python -m searchbox setup"


@dataclass(frozen=True)
class PiInstall:
    """An installed Pi: where its node_modules live, its version, and the node that runs it."""

    root: Path  # holds node_modules/ (bound read-only into the box)
    version: str
    node: str  # the node binary, links resolved
    node_version: str
    lock_sha256: str

    @property
    def package(self) -> Path:
        return self.root / "node_modules" / PACKAGE

    @property
    def cli(self) -> Path:
        return self.package / "dist" / "cli.js"


def lock_sha256() -> str:
    """The pin: package.json and package-lock.json as committed."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((NODE_DIR / name).read_bytes())
    return digest.hexdigest()


def pinned_version() -> str:
    """Pi's version as the lockfile pins it."""
    lock = json.loads((NODE_DIR / "package-lock.json").read_text(encoding="utf-8"))
    return str(lock["packages"][f"node_modules/{PACKAGE}"]["version"])


def install_dir(root: Optional[Path] = None) -> Path:
    """Where this pin installs: $SEARCHBOX_HOME/pi/<lock hash>/."""
    return (root or home()) / "pi" / lock_sha256()[:16]


def parse_version(text: str) -> tuple[int, ...]:
    """(20, 6, 0) from 'v20.6.0' (anything unparsable is (0,))."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    return tuple(int(p) for p in match.groups()) if match else (0,)


def find_node() -> tuple[str, str]:
    """(node binary with links resolved, its version); SetupError when there is none or it is older than Pi needs."""
    found = shutil.which("node")
    if not found:
        raise SetupError(f"Pi needs Node.js >= {'.'.join(map(str, MIN_NODE))} and none is on PATH: "
                         "`apt-get install nodejs npm` (Debian 13; on Debian 12 use NodeSource's nodejs 20), then `python -m searchbox setup`")
    node = os.path.realpath(found)
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(f"{node} --version failed: {exc}") from exc
    if parse_version(version) < MIN_NODE:
        raise SetupError(f"Pi needs Node.js >= {'.'.join(map(str, MIN_NODE))}; {node} is {version or 'unknown'}: install Node 20 "
                         "(Debian 13's nodejs, or NodeSource's on Debian 12), then `python -m searchbox setup`")
    return node, version


def _installed_version(root: Path) -> Optional[str]:
    try:
        return str(json.loads((root / "node_modules" / PACKAGE / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_pi() -> Optional[PiInstall]:
    """The installed pin, or None (not installed, half installed, or no usable node)."""
    root = install_dir()
    if not (root / STAMP).is_file():
        return None
    version = _installed_version(root)
    if version != pinned_version():
        return None
    try:
        node, node_version = find_node()
    except SetupError:
        return None
    return PiInstall(root.resolve(), version, node, node_version, lock_sha256())


def require_pi() -> PiInstall:
    """The installed pin, or SetupError saying what is missing and the fix."""
    node, node_version = find_node()  # its own error says what to install
    found = find_pi()
    if found is None:
        raise SetupError(f"harness=pi needs Pi {pinned_version()} installed under {install_dir()}: run `{FIX}` "
                         f"(npm ci of the pinned lockfile; node {node_version} at {node})")
    return found


def ensure_pi() -> PiInstall:
    """Install the pin (`npm ci`, no install scripts: Pi's RPC mode needs none of them) unless it is there; the only
    place Pi is fetched."""
    found = find_pi()
    if found is not None:
        return found
    find_node()
    npm = shutil.which("npm")
    if not npm:
        raise SetupError("Pi's install needs npm: `apt-get install npm`, then `python -m searchbox setup`")
    target = install_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".installing-", dir=target.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(NODE_DIR / name, scratch / name)
        # --ignore-scripts: koffi (Windows terminal only) and protobufjs (Google's SDK) are the only install scripts;
        # --omit=optional drops the clipboard helper. Neither is used in RPC mode.
        cmd = [npm, "ci", "--ignore-scripts", "--omit=dev", "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise SetupError(f"npm ci of Pi took over {NPM_TIMEOUT_S:.0f}s; run `{FIX}` again") from exc
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise SetupError(f"npm ci of Pi failed ({said[-1] if said else f'exit {done.returncode}'}): check the npm registry "
                             f"is reachable, then run `{FIX}` again")
        if _installed_version(scratch) != pinned_version():
            raise SetupError(f"npm ci installed Pi {_installed_version(scratch)}, not the pinned {pinned_version()}")
        (scratch / STAMP).write_text(pinned_version() + "\n")
        os.chmod(scratch, 0o755)  # mkdtemp made it 0700: the box's uid must read Pi's modules
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    found = find_pi()
    if found is None:
        raise SetupError(f"Pi installed under {target} but cannot be used (node missing?)")
    return found
