"""How Codex starts for a turn: its configuration (config.toml in a private CODEX_HOME), its command line, its box.

`codex exec` runs one turn and exits, so each turn is one box: `codex exec --json <question>` for the first,
`codex exec resume <thread> --json Continue.` for the next (its session lives in CODEX_HOME, a private folder
on disk under the run's codex/box/, kept from box to box). Codex's HTTP client takes no unix socket, so the box
runs the loopback forwarder (harness/bridge/forward.mjs) beside it: the box's own loopback port PORT (its own
network namespace: nothing else listens or reaches it) piped to the harness's channel. The box's command is a
fixed shell line: start the forwarder, wait for its `listening` line, run codex with stdin closed, print
codex's exit status as one JSON line (`searchbox.exit`).

Codex's own tools are off (no shell, no apply_patch, no web search, no images, no sub-agents, no goals, plugins,
skills, hooks or memories); every tool of the run reaches it over MCP (harness/bridge/mcp.mjs, run by Codex in
the box) and runs in searchbox. Its own sandbox is off (danger-full-access: the box is the boundary, and Codex
runs no command of the model's anyway), approvals are never asked, update checks, analytics, feedback, history
and OpenTelemetry are off, and its only provider is searchbox's, with a dummy API key (no ChatGPT login).

Everything here that can change what Codex does is also what `identity` returns for the run key.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from ...config import RunConfig
from ...record.spec import RunSpec
from ...tools import sandbox
from ...tools.catalog import offered
from ...tools.longbox import LongBox, start_box
from ..agent import system_prompt
from ..npm import NpmInstall
from .install import binary, lock_sha256, pinned_version

BRIDGE = Path(__file__).resolve().parents[1] / "bridge"
PROVIDER = "searchbox"
MCP_SERVER = "searchbox"  # Codex names its tools mcp__searchbox (wire.NAMESPACE)
INSIDE = "/work"  # Codex's cwd in the box: an empty folder (the model's files are in work/, which only searchbox's tools reach)
BOX_CODEX, BOX_BRIDGE, BOX_CHANNEL, BOX_HOME = "/searchbox/codex", "/searchbox/bridge", "/searchbox/channel/channel.sock", "/searchbox/home"
PORT = 8787  # on the box's own loopback
KEY_ENV = "SEARCHBOX_API_KEY"  # the provider's env_key: a dummy, the channel takes no key
HIDDEN = (".codex", ".agents")  # project config, rules and skills Codex reads from its cwd: empty and read-only
# The forwarder first (its `listening` line), then codex with stdin closed (exec reads a piped stdin as more prompt),
# then codex's exit status as one JSON line; the box ends with the forwarder when the harness kills it.
SCRIPT = ('node="$1"; fwd="$2"; shift 2; "$node" "$fwd" | { read -r ready || exit 97; "$@" </dev/null; '
          'echo "{\\"type\\":\\"searchbox.exit\\",\\"code\\":$?}"; }')
EXIT = "searchbox.exit"
# Codex 0.171's feature flags that add a tool or a prompt section of its own (`codex features list`); all off.
FEATURES_OFF = ("shell_tool", "unified_exec", "view_image", "goals", "apps", "plugins", "image_generation", "skill_search", "hooks",
                "memories", "tool_suggest", "sleep_tool", "browser_use", "computer_use", "shell_snapshot",
                "default_mode_request_user_input",
                "unbounded_connection_retries")  # on: a connection the channel closes is retried forever ("waiting for network")


def tool_names(cfg: RunConfig) -> list[str]:
    return [s.name for s in offered(cfg)]


def channel_tools(cfg: RunConfig) -> list[dict]:
    """Every tool of the run as the MCP bridge serves it: the catalog's name, description and schema."""
    return [s.schema() for s in offered(cfg)]


def task(cfg: RunConfig) -> str:
    """The task joined to Codex's prompt (`developer_instructions`): the native loop's system prompt for the same
    tools, date resolved, as Pi gets it appended."""
    from ...config import resolved_today

    harness = dataclasses.replace(cfg.harness, today=resolved_today(cfg.harness))
    return system_prompt(harness, "", tool_names(cfg))


def settings(cfg: RunConfig, context_window: int, task_text: str, channel: str, node: str) -> dict[str, Any]:
    """config.toml as data (`toml` renders it). No retries (the harness's client retries what a server fails; a
    refusal from the channel must end Codex's turn) and timeouts of a day: the harness enforces the deadlines."""
    day_ms = 86_400_000
    return {
        "model": cfg.model.name, "model_provider": PROVIDER, "model_context_window": int(context_window),
        "model_reasoning_summary": "none", "check_for_update_on_startup": False, "web_search": "disabled",
        "developer_instructions": task_text, "include_apps_instructions": False, "include_collaboration_mode_instructions": False,
        "project_doc_max_bytes": 0, "approval_policy": "never", "sandbox_mode": "danger-full-access",
        "analytics": {"enabled": False}, "feedback": {"enabled": False}, "history": {"persistence": "none"},
        "otel": {"exporter": "none", "log_user_prompt": False}, "skills": {"include_instructions": False, "bundled": {"enabled": False}},
        "agents": {"enabled": False}, "features": {name: False for name in FEATURES_OFF},
        "model_providers": {PROVIDER: {"name": PROVIDER, "base_url": f"http://127.0.0.1:{PORT}/v1", "wire_api": "responses",
                                       "env_key": KEY_ENV, "request_max_retries": 0, "stream_max_retries": 0,
                                       "stream_idle_timeout_ms": day_ms}},
        "mcp_servers": {MCP_SERVER: {"command": node, "args": [f"{BOX_BRIDGE}/mcp.mjs"], "env": {"SEARCHBOX_CHANNEL": channel},
                                     "startup_timeout_sec": 120, "tool_timeout_sec": 86_400}},
    }


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string (ASCII, \" \\ \n \uXXXX escapes)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def toml(data: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer for config.toml: scalars and lists first, then tables ([a.b]); an `env` map inline."""
    lines = [f"{json.dumps(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict) or k == "env"]
    for key, value in data.items():
        if isinstance(value, dict) and key != "env":
            name = f"{prefix}{json.dumps(key)}"
            lines.append(f"\n[{name}]")
            body = toml(value, f"{name}.")
            lines.append(body)
    return "\n".join(line for line in lines if line != "")


def config_toml(cfg: RunConfig, spec: RunSpec, context_window: int, node: str) -> bytes:
    return (toml(settings(cfg, context_window, spec.harness["task"], BOX_CHANNEL, node)) + "\n").encode("utf-8")


def argv(codex: NpmInstall, node: str, prompt: str, thread: str = "") -> list[str]:
    """The box's command: the forwarder, then `codex exec` (a new session, or `resume <thread>`) on the prompt."""
    exe = f"{BOX_CODEX}/{binary(codex.root).relative_to(codex.root)}"
    head = [exe, "exec", *(["resume", thread] if thread else [])]
    return ["/bin/sh", "-c", SCRIPT, "sh", node, f"{BOX_BRIDGE}/forward.mjs", *head, "--json", "--strict-config",
            "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--", prompt]


def identity(cfg: RunConfig) -> dict:
    """What the run key needs beyond the config: Codex's pin, the bridge's code, the task, the settings, the tools."""
    import hashlib

    bridge = hashlib.sha256(b"".join((BRIDGE / n).read_bytes() for n in ("mcp.mjs", "forward.mjs"))).hexdigest()[:16]
    shown = settings(cfg, 0, "<task>", BOX_CHANNEL, "node")
    return {"codex": pinned_version(), "lock": lock_sha256()[:16], "bridge": bridge, "task": task(cfg), "settings": shown,
            "tools": tool_names(cfg), "inside": INSIDE, "channel_tools": channel_tools(cfg)}


def environment(channel: str) -> dict[str, str]:
    return {"CODEX_HOME": BOX_HOME, KEY_ENV: "searchbox", "SEARCHBOX_CHANNEL": channel, "SEARCHBOX_PORT": str(PORT), "NO_COLOR": "1"}


def start(codex: NpmInstall, cfg: RunConfig, run_codex: Path, socket_path: Path, mode: str, config: bytes, prompt: str,
          thread: str) -> LongBox:
    """One turn's box: Codex's install, the bridge and the channel's socket (not its folder) read-only; CODEX_HOME
    private and writable on disk (its config.toml rewritten each turn, its sessions kept); an empty cwd at INSIDE."""
    ro = {str(codex.root): BOX_CODEX, str(BRIDGE): BOX_BRIDGE, str(socket_path): BOX_CHANNEL}
    if not any(codex.node.startswith(os.path.realpath(d) + os.sep) for d in sandbox.SYSTEM_DIRS if os.path.isdir(d)):
        ro[codex.node] = codex.node  # a node outside /usr (nvm, a tarball): shown at its own path
    limits = dataclasses.replace(sandbox.limits_for(cfg.harness), work_bytes=0)
    cpu_s = (cfg.harness.run_ceiling_s or 7 * 86_400) + 60
    cwd = run_codex / "box" / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    return start_box(argv(codex, codex.node, prompt, thread), cwd, [], mode, limits, cpu_s=cpu_s, inside=INSIDE, ro_binds=ro,
                     private={"home": BOX_HOME}, private_disk=run_codex / "box", hidden=HIDDEN, env=environment(BOX_CHANNEL),
                     seed={"home": {"config.toml": config}})
