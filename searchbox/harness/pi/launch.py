"""How Pi starts for a run: its configuration (settings.json, models.json), its command line, and its box.

Pi is behind its own wall: every tool the model calls (Pi's built-in names too: read, bash, edit, ...) is the
harness's, registered by the extension from the channel and run by searchbox in the per-call box of the native
loop, with work/ at INSIDE there. Nothing the model runs shares Pi's box: it cannot write Pi's RPC stream or
stdin, signal Pi, or see Pi's files. Pi's box holds Pi alone: its modules, the extension, the channel's socket,
an empty working folder, and two private writable folders (its session, its agent folder with settings.json,
models.json and their lock files).

Everything here that can change what Pi does is also what `identity` returns for the run key: Pi's pinned
version, the extension's code, the task appended to Pi's system prompt, the settings and the provider entry,
the tools (all from the catalog, over the channel).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from ..agent import system_prompt
from ...config import RunConfig
from ...record.spec import RunSpec
from ...tools import sandbox
from ...tools.catalog import offered
from ...tools.longbox import LongBox, start_box
from .install import PiInstall, lock_sha256, pinned_version

EXTENSION = Path(__file__).resolve().parent / "extension" / "searchbox.mjs"
PROVIDER = "searchbox"
INSIDE = "/work"  # work/ in Pi's box: Pi's prompt names its cwd, so it is the same for every run
BOX_PI, BOX_EXT, BOX_AGENT, BOX_CHANNEL, BOX_SESSION = ("/searchbox/pi", "/searchbox/ext", "/searchbox/agent", "/searchbox/channel",
                                                       "/searchbox/session")
SESSION_FILE = "session.jsonl"
HIDDEN = (".pi",)  # Pi reads project settings, prompts and extensions from <cwd>/.pi: the model may not write them
BUILTINS = ("read", "bash", "edit", "write", "grep", "find", "ls")  # Pi's own tools, same names as the catalog's
# V8 reserves 8 GiB of address space per WebAssembly memory for its bounds-check guard pages (undici's HTTP parser
# is WebAssembly); with explicit bounds checks instead, Pi runs under the box's per-process limit like everything else.
NODE_FLAGS = ("--disable-wasm-trap-handler",)

# Pi's settings for a run. Its compaction is left as released (enabled, reserve 16384, keep 20000 tokens): with an
# 8K window it compacts after every turn, which the record counts. Its own retries are off: the harness's client
# already retries what a server fails (a second policy would bill calls twice), and a refusal from the channel
# (a stop, a deadline) must end Pi's call, not be retried.
SETTINGS = {
    "defaultThinkingLevel": "off",
    "quietStartup": True,
    "enableInstallTelemetry": False,
    "retry": {"enabled": False, "provider": {"maxRetries": 0, "timeoutMs": 86_400_000}},
}
# llama-server speaks OpenAI chat completions; as Pi's docs say for such servers: system (not developer) role, no
# reasoning_effort.
COMPAT = {"supportsDeveloperRole": False, "supportsReasoningEffort": False}


def tool_names(cfg: RunConfig) -> list[str]:
    return [s.name for s in offered(cfg)]


def channel_tools(cfg: RunConfig) -> list[dict]:
    """Every tool of the run as the extension registers it (in place of Pi's own of the same name): the catalog's
    name, description and schema; each call runs in searchbox."""
    return [s.schema() for s in offered(cfg)]


def task(cfg: RunConfig) -> str:
    """The task appended to Pi's system prompt: the native loop's system prompt for the same tools, date resolved."""
    from ...config import resolved_today

    harness = dataclasses.replace(cfg.harness, today=resolved_today(cfg.harness))
    return system_prompt(harness, "", tool_names(cfg))


def models_json(cfg: RunConfig, context_window: int) -> dict:
    model = {"id": cfg.model.name, "name": cfg.model.name, "reasoning": False, "input": ["text"],
             "contextWindow": int(context_window), "maxTokens": int(cfg.model.max_tokens),
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}
    # The base URL names nothing reachable: the extension sends every request over the channel's socket.
    return {"providers": {PROVIDER: {"baseUrl": "http://searchbox.channel/v1", "api": "openai-completions", "apiKey": "searchbox",
                                     "compat": COMPAT, "models": [model]}}}


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where Pi finds its parts: the box's fixed paths, or (sandbox=none) the host's."""

    pi: str  # holds node_modules/
    ext: str  # the extension's folder
    agent: str  # settings.json, models.json (writable: Pi locks and may rewrite them)
    channel: str  # the socket
    session: str  # the session's folder
    cwd: str  # Pi's working folder (empty: the model's files are in work/, which only the harness's tools reach)


BOX = Layout(BOX_PI, BOX_EXT, BOX_AGENT, f"{BOX_CHANNEL}/channel.sock", BOX_SESSION, INSIDE)
PRIVATE = {"session": BOX_SESSION, "agent": BOX_AGENT}  # Pi's writable folders, outside its cwd


def host_layout(pi: PiInstall, run_pi: Path, channel: Path, work: Path) -> Layout:
    """sandbox=none: Pi's cwd is work/ itself (its prompt names the folder the tools work in; it writes nothing there)."""
    box = run_pi / "box"
    return Layout(str(pi.root), str(EXTENSION.parent), str(box / "agent"), str(channel), str(box / "session"), str(work))


def argv(pi: PiInstall, cfg: RunConfig, spec: RunSpec, at: Layout = BOX) -> list[str]:
    """Pi in RPC mode with exactly what searchbox gives it: our extension only, no skills, templates, themes or
    context files, the run's tools, the task appended, the session file in the box's private folder."""
    return [pi.node, *NODE_FLAGS, f"{at.pi}/node_modules/@mariozechner/pi-coding-agent/dist/cli.js", "--mode", "rpc",
            "--provider", PROVIDER, "--model", cfg.model.name, "--thinking", "off",
            "--no-extensions", "-e", f"{at.ext}/{EXTENSION.name}", "--no-skills", "--no-prompt-templates", "--no-themes",
            "--no-context-files", "--session", f"{at.session}/{SESSION_FILE}",
            "--tools", ",".join(spec.harness["tools"]), "--append-system-prompt", spec.harness["task"]]


def identity(cfg: RunConfig) -> dict:
    """What the run key needs beyond the config: Pi's pin, our extension, the task, the settings and provider entry."""
    return {"pi": pinned_version(), "lock": lock_sha256()[:16], "extension": hashlib.sha256(EXTENSION.read_bytes()).hexdigest()[:16],
            "task": task(cfg), "settings": SETTINGS, "compat": COMPAT, "tools": tool_names(cfg), "inside": INSIDE,
            "channel_tools": channel_tools(cfg)}


def environment(spec: RunSpec, at: Layout = BOX) -> dict[str, str]:
    return {"PI_CODING_AGENT_DIR": at.agent, "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0",
            "SEARCHBOX_CHANNEL": at.channel, "SEARCHBOX_TODAY": spec.today}


def agent_files(cfg: RunConfig, context_window: int) -> dict[str, bytes]:
    """Pi's agent folder for the run: settings.json and models.json (the run's pi/agent/ keeps a copy)."""
    return {name: (json.dumps(data, indent=2) + "\n").encode("utf-8")
            for name, data in (("settings.json", SETTINGS), ("models.json", models_json(cfg, context_window)))}


def write_agent_dir(folder: Path, files: dict[str, bytes]) -> Path:
    """The record's copy of what Pi was given (Pi itself gets the same files in its private agent folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    for name, data in files.items():
        (folder / name).write_bytes(data)
        os.chmod(folder / name, 0o644)
    return folder


def start(pi: PiInstall, cfg: RunConfig, spec: RunSpec, run_pi: Path, socket_path: Path, mode: str, agent: dict[str, bytes],
          session: Optional[bytes], work: Path) -> LongBox:
    """Pi's box for the run: Pi's modules, our extension and the channel's socket (not its folder) read-only; its
    agent folder (seeded with `agent`) and session folder (with the run's copy of the session on resume) private
    and writable; an empty cwd at INSIDE. No work/, no dataroom: the model's tools run in boxes of their own."""
    ro = {str(pi.root): BOX_PI, str(EXTENSION.parent): BOX_EXT, str(socket_path): BOX.channel}
    if not any(pi.node.startswith(os.path.realpath(d) + os.sep) for d in sandbox.SYSTEM_DIRS if os.path.isdir(d)):
        ro[pi.node] = pi.node  # a node outside /usr (nvm, a tarball): shown at its own path
    # No work/ quota: Pi's folders are on disk under the run's pi/box/ (Pi writes its session and settings only).
    limits = dataclasses.replace(sandbox.limits_for(cfg.harness), work_bytes=0)
    cpu_s = (cfg.harness.run_ceiling_s or 7 * 86_400) + 60
    at = BOX if mode != "none" else host_layout(pi, run_pi, socket_path, work)
    cwd = run_pi / "box" / "cwd" if mode != "none" else Path(work)
    cwd.mkdir(parents=True, exist_ok=True)
    seed = {"agent": dict(agent), **({"session": {SESSION_FILE: session}} if session is not None else {})}
    return start_box(argv(pi, cfg, spec, at), cwd, [], mode, limits, cpu_s=cpu_s, inside=INSIDE, ro_binds=ro,
                     private=dict(PRIVATE), private_disk=run_pi / "box", hidden=HIDDEN, env=environment(spec, at), seed=seed)
