"""Codex CLI installed like every agent from npm (harness/npm.py): a committed lockfile, `npm ci` into
$SEARCHBOX_HOME/codex/<lock hash>/, nothing fetched at run time.

`@openai/codex` is a node wrapper around a native (Rust, static musl) binary shipped in a platform package
(`@openai/codex-linux-x64`) that the wrapper names in its optionalDependencies: the install keeps optional
dependencies (npm installs only the one for this machine's os and cpu) and the harness runs that binary
directly, without node (the wrapper only finds it and execs it).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Optional

from ...errors import SetupError
from ..npm import NpmInstall, NpmPin

PACKAGE = "@openai/codex"
NODE_DIR = Path(__file__).resolve().parent / "node"  # package.json + package-lock.json: the pin
MIN_NODE = (20, 0, 0)  # the wrapper says >=16; the MCP bridge and the forwarder (harness/bridge/) run on the same node
# No install scripts (the package has none); optional dependencies kept: the native binary is one of them.
PIN = NpmPin("Codex", PACKAGE, NODE_DIR, MIN_NODE, flags=("--ignore-scripts", "--omit=dev"))
# The wrapper's own table (bin/codex.js): the platform package and the binary's folder for this machine.
TARGETS = {"x86_64": ("@openai/codex-linux-x64", "x86_64-unknown-linux-musl"),
           "aarch64": ("@openai/codex-linux-arm64", "aarch64-unknown-linux-musl")}


def binary(root: Path) -> Optional[Path]:
    """The native codex binary under an install, or None (another machine, or the optional package missing)."""
    target = TARGETS.get(platform.machine())
    if target is None:
        return None
    path = root / "node_modules" / target[0] / "vendor" / target[1] / "bin" / "codex"
    return path if path.is_file() else None


def lock_sha256() -> str:
    return PIN.lock_sha256()


def pinned_version() -> str:
    return PIN.pinned_version()


def find_codex() -> Optional[NpmInstall]:
    found = PIN.find()
    return found if found is not None and binary(found.root) is not None else None


def require_codex() -> NpmInstall:
    found = PIN.require("codex")
    if binary(found.root) is None:
        raise SetupError(f"harness=codex needs Codex's native binary for {platform.machine()} under {found.root}/node_modules "
                         f"({TARGETS.get(platform.machine(), ('no Linux build for this cpu',))[0]}): remove {found.root} and run "
                         "`python -m searchbox setup`")
    return found


def ensure_codex() -> NpmInstall:
    PIN.ensure()
    return require_codex()
