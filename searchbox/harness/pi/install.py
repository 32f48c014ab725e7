"""Pi installed like everything else (harness/npm.py): a committed lockfile, `npm ci` into $SEARCHBOX_HOME/pi/,
nothing fetched at run time. `python -m searchbox setup` calls `ensure_pi` once; a run only looks the install up
(`require_pi`) and refuses, with the fix, when it is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..npm import FIX, STAMP, NpmInstall, NpmPin, parse_version  # noqa: F401 (Pi's names for them)

PACKAGE = "@mariozechner/pi-coding-agent"
NODE_DIR = Path(__file__).resolve().parent / "node"  # package.json + package-lock.json: the pin
MIN_NODE = (20, 6, 0)  # Pi's engines field
# --ignore-scripts: koffi (Windows terminal only) and protobufjs (Google's SDK) are the only install scripts;
# --omit=optional drops the clipboard helper. Neither is used in RPC mode.
PIN = NpmPin("Pi", PACKAGE, NODE_DIR, MIN_NODE)


class PiInstall(NpmInstall):
    """An installed Pi: its modules, version and node, and the cli.js that runs it."""

    @property
    def cli(self) -> Path:
        return self.package / "dist" / "cli.js"


def _pi(found: Optional[NpmInstall]) -> Optional[PiInstall]:
    return None if found is None else PiInstall(found.root, found.version, found.node, found.node_version, found.lock_sha256, found.package_name)


def lock_sha256() -> str:
    return PIN.lock_sha256()


def pinned_version() -> str:
    return PIN.pinned_version()


def install_dir(root: Optional[Path] = None) -> Path:
    return PIN.install_dir(root)


def find_node() -> tuple[str, str]:
    return PIN.find_node()


def find_pi() -> Optional[PiInstall]:
    return _pi(PIN.find())


def require_pi() -> PiInstall:
    return _pi(PIN.require("pi"))


def ensure_pi() -> PiInstall:
    return _pi(PIN.ensure())
