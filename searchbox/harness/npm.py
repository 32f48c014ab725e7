"""An agent from npm, installed like everything else: a committed lockfile, `npm ci` into $SEARCHBOX_HOME/<name>/,
nothing fetched at run time. Pi (harness/pi/install.py), Claude Code and Codex are each one `NpmPin`.

`python -m searchbox setup` calls `ensure` once; a run only looks the install up (`require`) and refuses, with the
fix, when it is missing. The install folder is named by the lockfile's hash, so a changed pin installs beside the old
one and a half-finished install (no stamp) is never used.
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

from ..errors import SetupError
from ..paths import home

STAMP = ".searchbox-installed"
NPM_TIMEOUT_S = 900.0
FIX = "python -m searchbox setup"


@dataclass(frozen=True)
class NpmInstall:
    """An installed pin: where its node_modules live, its version, and the node that runs it."""

    root: Path  # holds node_modules/ (bound read-only into the box)
    version: str
    node: str  # the node binary, links resolved
    node_version: str
    lock_sha256: str
    package_name: str

    @property
    def package(self) -> Path:
        return self.root / "node_modules" / self.package_name


def parse_version(text: str) -> tuple[int, ...]:
    """(20, 6, 0) from 'v20.6.0' (anything unparsable is (0,))."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    return tuple(int(p) for p in match.groups()) if match else (0,)


@dataclass(frozen=True)
class NpmPin:
    """One agent pinned by the package.json + package-lock.json in `node_dir`, installed under $SEARCHBOX_HOME/`name`/."""

    name: str  # the harness's name in messages ("Pi") and its install folder under $SEARCHBOX_HOME (lower-cased)
    package: str  # the npm package the lockfile pins
    node_dir: Path
    min_node: tuple[int, int, int]  # the package's engines field
    folder: str = ""  # $SEARCHBOX_HOME/<folder>/ (default: the name, lower-cased)
    # npm ci's flags beyond the defaults: --ignore-scripts unless the package needs its install scripts
    flags: tuple[str, ...] = ("--ignore-scripts", "--omit=dev", "--omit=optional")

    def lock_sha256(self) -> str:
        """The pin: package.json and package-lock.json as committed."""
        digest = hashlib.sha256()
        for name in ("package.json", "package-lock.json"):
            digest.update((self.node_dir / name).read_bytes())
        return digest.hexdigest()

    def pinned_version(self) -> str:
        """The package's version as the lockfile pins it."""
        lock = json.loads((self.node_dir / "package-lock.json").read_text(encoding="utf-8"))
        return str(lock["packages"][f"node_modules/{self.package}"]["version"])

    def install_dir(self, root: Optional[Path] = None) -> Path:
        """Where this pin installs: $SEARCHBOX_HOME/<folder>/<lock hash>/."""
        return (root or home()) / (self.folder or self.name.lower()) / self.lock_sha256()[:16]

    def find_node(self) -> tuple[str, str]:
        """(node binary with links resolved, its version); SetupError when there is none or it is older than needed."""
        need = ".".join(map(str, self.min_node))
        found = shutil.which("node")
        if not found:
            raise SetupError(f"{self.name} needs Node.js >= {need} and none is on PATH: "
                             "`apt-get install nodejs npm` (Debian 13; on Debian 12 use NodeSource's nodejs 20), then `python -m searchbox setup`")
        node = os.path.realpath(found)
        try:
            version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SetupError(f"{node} --version failed: {exc}") from exc
        if parse_version(version) < self.min_node:
            raise SetupError(f"{self.name} needs Node.js >= {need}; {node} is {version or 'unknown'}: install Node 20 "
                             "(Debian 13's nodejs, or NodeSource's on Debian 12), then `python -m searchbox setup`")
        return node, version

    def installed_version(self, root: Path) -> Optional[str]:
        try:
            return str(json.loads((root / "node_modules" / self.package / "package.json").read_text(encoding="utf-8"))["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def find(self) -> Optional[NpmInstall]:
        """The installed pin, or None (not installed, half installed, or no usable node)."""
        root = self.install_dir()
        if not (root / STAMP).is_file():
            return None
        version = self.installed_version(root)
        if version != self.pinned_version():
            return None
        try:
            node, node_version = self.find_node()
        except SetupError:
            return None
        return NpmInstall(root.resolve(), version, node, node_version, self.lock_sha256(), self.package)

    def require(self, kind: str) -> NpmInstall:
        """The installed pin, or SetupError saying what is missing and the fix (`kind`: the harness= value)."""
        node, node_version = self.find_node()  # its own error says what to install
        found = self.find()
        if found is None:
            raise SetupError(f"harness={kind} needs {self.name} {self.pinned_version()} installed under {self.install_dir()}: run `{FIX}` "
                             f"(npm ci of the pinned lockfile; node {node_version} at {node})")
        return found

    def ensure(self) -> NpmInstall:
        """Install the pin (`npm ci`) unless it is there; the only place the agent is fetched."""
        found = self.find()
        if found is not None:
            return found
        self.find_node()
        npm = shutil.which("npm")
        if not npm:
            raise SetupError(f"{self.name}'s install needs npm: `apt-get install npm`, then `python -m searchbox setup`")
        target = self.install_dir()
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".installing-", dir=target.parent))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(self.node_dir / name, scratch / name)
            cmd = [npm, "ci", *self.flags, "--no-audit", "--no-fund", "--loglevel=error"]
            try:
                done = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                raise SetupError(f"npm ci of {self.name} took over {NPM_TIMEOUT_S:.0f}s; run `{FIX}` again") from exc
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip().splitlines()
                raise SetupError(f"npm ci of {self.name} failed ({said[-1] if said else f'exit {done.returncode}'}): check the npm registry "
                                 f"is reachable, then run `{FIX}` again")
            got = self.installed_version(scratch)
            if got != self.pinned_version():
                raise SetupError(f"npm ci installed {self.name} {got}, not the pinned {self.pinned_version()}")
            (scratch / STAMP).write_text(self.pinned_version() + "\n")
            os.chmod(scratch, 0o755)  # mkdtemp made it 0700: the box's uid must read the modules
            if target.exists():
                shutil.rmtree(target)
            scratch.rename(target)
        finally:
            if scratch.exists():
                shutil.rmtree(scratch, ignore_errors=True)
        found = self.find()
        if found is None:
            raise SetupError(f"{self.name} installed under {target} but cannot be used (node missing?)")
        return found
