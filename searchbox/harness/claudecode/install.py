"""Claude Code installed like Pi (harness/npm.py): a committed lockfile, `npm ci` into $SEARCHBOX_HOME/claude-code/,
nothing fetched at run time. `python -m searchbox setup` calls `ensure` once; a run only looks the install up
(`require`) and refuses, with the fix, when it is missing.

Claude Code 2.x is a native executable (one ~400 MB binary per platform, each an optional dependency of
`@anthropic-ai/claude-code`); the package's postinstall (install.cjs) only links that binary over a placeholder
`bin/claude.exe`. So npm ci keeps the optional dependencies (npm fetches only the one whose os/cpu/libc match) and
skips the scripts: the harness runs the platform binary itself. Node is not Claude Code's runtime here (the package's
`engines: node >= 22` is its wrapper's); it runs the two bridge scripts in the box (harness/bridge/forward.mjs and
mcp.mjs, Node's own modules only), for which Node 20 is enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import SetupError
from ..npm import FIX, NpmInstall, NpmPin

PACKAGE = "@anthropic-ai/claude-code"
NODE_DIR = Path(__file__).resolve().parent / "node"  # package.json + package-lock.json: the pin
MIN_NODE = (20, 0, 0)  # for the bridge scripts (Claude Code itself is a native binary)
PLATFORMS = ("linux-x64", "linux-arm64", "linux-x64-musl", "linux-arm64-musl")  # the platform packages a Linux host may get
PIN = NpmPin("Claude Code", PACKAGE, NODE_DIR, MIN_NODE, folder="claude-code", flags=("--ignore-scripts", "--omit=dev"))


@dataclass(frozen=True)
class ClaudeCodeInstall:
    """An installed Claude Code: the npm install, and the platform binary npm ci chose."""

    npm: NpmInstall
    binary: Path  # node_modules/@anthropic-ai/claude-code-<platform>/claude

    @property
    def version(self) -> str:
        return self.npm.version

    @property
    def root(self) -> Path:
        return self.npm.root

    @property
    def node(self) -> str:
        return self.npm.node

    @property
    def node_version(self) -> str:
        return self.npm.node_version


def platform_binary(root: Path) -> Optional[Path]:
    """The one platform binary under root's node_modules (npm installs only the matching one), or None."""
    found = [root / "node_modules" / f"{PACKAGE}-{p}" / "claude" for p in PLATFORMS]
    found = [p for p in found if p.is_file() and not p.is_symlink()]
    return found[0] if len(found) == 1 else None


def _with_binary(found: Optional[NpmInstall]) -> Optional[ClaudeCodeInstall]:
    if found is None:
        return None
    binary = platform_binary(found.root)
    return None if binary is None else ClaudeCodeInstall(found, binary)


def lock_sha256() -> str:
    return PIN.lock_sha256()


def pinned_version() -> str:
    return PIN.pinned_version()


def install_dir() -> Path:
    return PIN.install_dir()


def find() -> Optional[ClaudeCodeInstall]:
    return _with_binary(PIN.find())


def require() -> ClaudeCodeInstall:
    found = _with_binary(PIN.require("claude-code"))
    if found is None:
        raise SetupError(f"harness=claude-code: {install_dir()} holds no Claude Code binary for this platform "
                         f"({', '.join(PLATFORMS)}): run `{FIX}` on a supported Linux host")
    return found


def ensure() -> ClaudeCodeInstall:
    found = _with_binary(PIN.ensure())
    if found is None:
        raise SetupError(f"npm ci of Claude Code installed no binary for this platform under {install_dir()} "
                         f"(supported: {', '.join(PLATFORMS)})")
    return found
