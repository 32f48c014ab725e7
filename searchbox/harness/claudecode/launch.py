"""How Claude Code starts for a run: its command line, its environment, its MCP server, and its box.

Claude Code is behind the same wall as Pi: its own tools are all off (`--tools ""`), and the only tools it has are
the run's, served by searchbox's MCP bridge (harness/bridge/mcp.mjs) from the channel and run by searchbox in the
native loop's per-call box. Its box holds Claude Code alone: its binary, the bridge scripts and our start script
read-only, the channel's socket, an empty working folder at INSIDE, and one private writable folder, its config
folder (CLAUDE_CONFIG_DIR and HOME: its session transcripts, .claude.json), never the host's ~/.claude.

Its model calls go to ANTHROPIC_BASE_URL, a port on the box's own loopback where the forwarder
(harness/bridge/forward.mjs) pipes each connection to the channel; the harness answers `/v1/messages` there
(loop.py, wire.py). Everything that can change what Claude Code does is also what `identity` returns for the run key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Optional

from ..agent import system_prompt
from ...config import RunConfig
from ...record.spec import RunSpec
from ...tools import sandbox
from ...tools.catalog import offered
from ...tools.longbox import LongBox, start_box
from .install import ClaudeCodeInstall, lock_sha256, pinned_version

HERE = Path(__file__).resolve().parent
START = HERE / "box" / "start.mjs"
BRIDGE = HERE.parent / "bridge"  # forward.mjs, mcp.mjs
INSIDE = "/work"  # Claude Code's cwd in its box: its prompt names it, so it is the same for every run
BOX_CC, BOX_START, BOX_BRIDGE, BOX_CHANNEL, BOX_CONFIG = ("/searchbox/claude-code", "/searchbox/start", "/searchbox/bridge",
                                                         "/searchbox/channel", "/searchbox/config")
PORT = 8787  # on the box's own loopback (its network namespace has nothing else)
MCP_NAME = "searchbox"
PREFIX = f"mcp__{MCP_NAME}__"  # how Claude Code names an MCP server's tools
HIDDEN = (".claude", ".mcp.json", "CLAUDE.md")  # project settings Claude Code reads from its cwd: empty and read-only

# Claude Code's environment, beside the box's allowlist. Every switch here is read by the pinned binary (its own
# names); the box has no network anyway, so anything these miss fails closed.
QUIET = {
    # telemetry, error reports, update checks, feature flags, surveys, login: off
    "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_ENABLE_TELEMETRY": "0", "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_UPDATES": "1",
    "DISABLE_INSTALLATION_CHECKS": "1", "DISABLE_GROWTHBOOK": "1", "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1", "DISABLE_LOGIN_COMMAND": "1", "DISABLE_BUG_COMMAND": "1",
    "DISABLE_FEEDBACK_COMMAND": "1", "DISABLE_COST_WARNINGS": "1", "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1", "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    # nothing of the user's: no CLAUDE.md, memory, bundled skills, background tasks
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1", "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1", "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
    "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1", "CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1",
    # every tool the MCP server lists is in the request (no deferred tool search)
    "ENABLE_TOOL_SEARCH": "false",
    # the harness's client retries what a server fails (a second policy would bill twice); a refusal ends the call
    "CLAUDE_CODE_MAX_RETRIES": "0", "API_TIMEOUT_MS": str(86_400_000),
    # no compaction: every model call is a step of the turn (a conversation the server refuses is context_exhausted)
    "DISABLE_COMPACT": "1", "DISABLE_AUTO_COMPACT": "1",
    "CLAUDE_CODE_DISABLE_THINKING": "1", "MAX_THINKING_TOKENS": "0",
    # MCP: the bridge's start and each tool call (searchbox's own limits cut a call first)
    "MCP_TIMEOUT": "60000", "MCP_TOOL_TIMEOUT": str(86_400_000),
}


# Claude Code's flags for every run (the run key holds them): print mode over JSON lines, its own tools off, only our
# MCP server, nothing asked (a tool not allowed is refused), no settings files, no slash commands or skills.
FLAGS = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--tools", "",
         "--strict-mcp-config", "--permission-mode", "dontAsk", "--setting-sources", "", "--disable-slash-commands")


def tool_names(cfg: RunConfig) -> list[str]:
    return [s.name for s in offered(cfg)]


def channel_tools(cfg: RunConfig) -> list[dict]:
    """Every tool of the run as the bridge lists it: the catalog's name, description and schema."""
    return [s.schema() for s in offered(cfg)]


def task(cfg: RunConfig) -> str:
    """The task appended to Claude Code's system prompt: the native loop's system prompt for the same tools."""
    from ...config import resolved_today

    harness = dataclasses.replace(cfg.harness, today=resolved_today(cfg.harness))
    return system_prompt(harness, "", tool_names(cfg))


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where Claude Code finds its parts: the box's fixed paths, or (sandbox=none) the host's."""

    binary: str
    start: str  # start.mjs
    bridge: str  # forward.mjs, mcp.mjs
    channel: str  # the socket
    config: str  # CLAUDE_CONFIG_DIR and HOME (writable)
    cwd: str
    port: int


def box_layout(cc: ClaudeCodeInstall) -> Layout:
    rel = cc.binary.relative_to(cc.root)
    return Layout(f"{BOX_CC}/{rel}", f"{BOX_START}/{START.name}", BOX_BRIDGE, f"{BOX_CHANNEL}/channel.sock", BOX_CONFIG, INSIDE, PORT)


def host_layout(cc: ClaudeCodeInstall, run_cc: Path, channel: Path, work: Path) -> Layout:
    """sandbox=none: the host's paths, and a free port of the host's loopback (there is no box network)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return Layout(str(cc.binary), str(START), str(BRIDGE), str(channel), str(run_cc / "box" / "config"), str(work), port)


def mcp_config(node: str, at: Layout) -> dict:
    """The one MCP server Claude Code gets (`--strict-mcp-config`: no other is read): the bridge, on the channel."""
    return {"mcpServers": {MCP_NAME: {"type": "stdio", "command": node, "args": [f"{at.bridge}/mcp.mjs"],
                                      "env": {"SEARCHBOX_CHANNEL": at.channel}}}}


def argv(cc: ClaudeCodeInstall, cfg: RunConfig, spec: RunSpec, at: Layout, resume: Optional[str] = None) -> list[str]:
    """Claude Code's print mode over JSON lines (each prompt a line on its stdin, so `Continue.` continues the
    session), its own tools off, the run's tools over MCP and allowed (nothing else is: dontAsk), the task appended
    to its system prompt; `resume`: the session (its id) to continue."""
    allowed = ",".join(PREFIX + name for name in spec.harness["tools"])
    return [cc.node, at.start, f"{at.bridge}/forward.mjs", at.binary, *FLAGS, "--model", cfg.model.name,
            "--mcp-config", json.dumps(mcp_config(cc.node, at), separators=(",", ":")),
            *(["--allowedTools", allowed] if allowed else []), "--append-system-prompt", spec.harness["task"],
            *(["--resume", resume] if resume else [])]


def environment(cfg: RunConfig, at: Layout) -> dict[str, str]:
    name = cfg.model.name
    return {**QUIET, "HOME": at.config, "CLAUDE_CONFIG_DIR": at.config,
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{at.port}", "ANTHROPIC_API_KEY": "searchbox",  # a dummy: no login
            # any model Claude Code picks for a side call (its "small fast model", a subagent) is the run's, and goes
            # through the same route and accounting
            "ANTHROPIC_SMALL_FAST_MODEL": name, "ANTHROPIC_DEFAULT_HAIKU_MODEL": name, "ANTHROPIC_DEFAULT_SONNET_MODEL": name,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": name, "CLAUDE_CODE_SUBAGENT_MODEL": name,
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(int(cfg.model.max_tokens)),
            "SEARCHBOX_CHANNEL": at.channel, "SEARCHBOX_PORT": str(at.port)}


def identity(cfg: RunConfig) -> dict:
    """What the run key needs beyond the config: the pin, our scripts, the task, the environment and the tools."""
    scripts = hashlib.sha256()
    for path in (START, BRIDGE / "forward.mjs", BRIDGE / "mcp.mjs"):
        scripts.update(path.read_bytes())
    return {"claude_code": pinned_version(), "lock": lock_sha256()[:16], "scripts": scripts.hexdigest()[:16], "task": task(cfg),
            "flags": list(FLAGS), "env": QUIET, "tools": tool_names(cfg), "inside": INSIDE, "channel_tools": channel_tools(cfg)}


def start(cc: ClaudeCodeInstall, cfg: RunConfig, spec: RunSpec, run_cc: Path, socket_path: Path, mode: str, work: Path,
          session: Optional[tuple[str, str, bytes]] = None) -> tuple[LongBox, Layout]:
    """Claude Code's box for the run: its install, our start script, the bridge and the channel's socket (not its
    folder) read-only; its config folder private and writable; an empty cwd at INSIDE. No work/, no dataroom: the
    model's tools run in boxes of their own. `session` (its id, its file's path in the config folder, the file as of
    the checkpoint) is put back in the config folder and continued (`--resume`)."""
    ro = {str(cc.root): BOX_CC, str(START.parent): BOX_START, str(BRIDGE): BOX_BRIDGE, str(socket_path): f"{BOX_CHANNEL}/channel.sock"}
    if not any(cc.node.startswith(os.path.realpath(d) + os.sep) for d in sandbox.SYSTEM_DIRS if os.path.isdir(d)):
        ro[cc.node] = cc.node  # a node outside /usr (nvm, a tarball): shown at its own path
    limits = dataclasses.replace(sandbox.limits_for(cfg.harness), work_bytes=0)
    cpu_s = (cfg.harness.run_ceiling_s or 7 * 86_400) + 60
    at = box_layout(cc) if mode != "none" else host_layout(cc, run_cc, socket_path, work)
    cwd = run_cc / "box" / "cwd" if mode != "none" else Path(work)
    cwd.mkdir(parents=True, exist_ok=True)
    seed = {"config": {session[1]: session[2]}} if session else {}
    box = start_box(argv(cc, cfg, spec, at, session[0] if session else None), cwd, [], mode, limits, cpu_s=cpu_s, inside=INSIDE,
                    ro_binds=ro, private={"config": BOX_CONFIG}, private_disk=run_cc / "box", hidden=HIDDEN if mode != "none" else (),
                    env=environment(cfg, at), seed=seed)
    return box, at
