"""Hostile battery, rounds two and three (pi): attempts registered into tests.hostile_attempts.ATTEMPTS (imported at its end).

The attempts that matter for a second harness, made through Pi itself: the model (scripted) has Pi's bash run
them, for a whole run. One probe run serves every attempt here (Pi starts in tens of seconds on a busy
machine); each attempt checks its own part of it; a second run kills Pi mid-call. Round three (issue 36): forged
events and commands on Pi's RPC stream, host paths in /proc, the channel from outside the box, Pi's own limits,
a tree work/ cannot keep. Root or not, the same attempts. Unavailable when Pi or bubblewrap is not installed.
The probe, and the checks Claude Code's attempts make too, are tests/hostile_agents.py's.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
from pathlib import Path

from tests import hostile_agents as agents
from tests.hostile_agents import FORGED_ID, Probe, clean
from tests.hostile_attempts import attempt, held


def _use_real_pi() -> None:
    """The installed Pi, seen from the current SEARCHBOX_HOME (tests isolate it)."""
    from searchbox.harness.pi import install

    agents.use_real("Pi", install.find_pi, install.install_dir(Path(agents.REAL_HOME)), install.install_dir)


def _channel_sockets(p: Probe) -> list[str]:
    """The channel sockets made since the probe started (this run's among them; others' refuse us just the same)."""
    found = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "sb-pi-*", "channel.sock")):
        with contextlib.suppress(OSError):
            if os.stat(os.path.dirname(path)).st_mtime >= p.started - 1:
                found.append(path)
    return found


probe = agents.Once(lambda: agents.run_probe("pi", _use_real_pi, _channel_sockets, contextlib.nullcontext()))


@attempt("pi", "through Pi's bash and read: /etc/shadow, a secret planted beside the run, a sibling run's run_meta.json, /root")
def pi_host_files(tmp: Path) -> str:
    agents.no_host_files(probe())
    return "the host's files are not in Pi's box"


@attempt("pi", "from Pi's box: connect to a host loopback listener, resolve names, reach the internet")
def pi_network(tmp: Path) -> str:
    agents.no_network(probe())
    return "no route but the channel"


@attempt("pi", "use the channel from the model's commands (absolute targets, Host, CONNECT, another model, slot or grammar)")
def pi_channel_elsewhere(tmp: Path) -> str:
    agents.no_channel_from_commands(probe())
    return "the channel is not in the box the model's commands run in; only Pi's calls reach the model, accounted"


@attempt("pi", "read harness secrets from Pi's environment and every process's /proc/*/environ in its box")
def pi_environment(tmp: Path) -> str:
    allowed = {"PATH", "LANG", "HOME", "TMPDIR", "TERM", "PWD", "SHLVL", "_", "OLDPWD", "PI_CODING_AGENT_DIR", "PI_OFFLINE",
               "PI_SKIP_VERSION_CHECK", "PI_TELEMETRY", "SEARCHBOX_CHANNEL", "SEARCHBOX_TODAY", "PI_CODING_AGENT",
               "RIPGREP_CONFIG_PATH"}  # the box's fixed value: its /etc/ripgreprc
    keys = agents.allowed_environment(probe(), allowed)
    return f"only {len(keys)} allowlisted variables"


@attempt("pi", "links from Pi's box: / and a host file through work/, ANSWER.md and Pi's session file as links to a host file")
def pi_links(tmp: Path) -> str:
    p = probe()
    agents.no_links_followed(p, "pi")
    for snap in (p.run_dir / "snapshots").glob("*"):
        clean(p, snap.read_text(errors="replace"), snap.name)
    held(p.meta.get("answer_source") == "none", f"ANSWER.md read through a link: {p.meta.get('answer_source')}")
    return "no link followed by Pi's box or by the harness"


@attempt("pi", "leave processes running after a Pi run (setsid, nohup, a subshell), started from Pi's bash")
def pi_processes(tmp: Path) -> str:
    return agents.no_processes_after(probe())

def _rows(p: Probe):
    import pandas as pd

    path = p.run_dir / "tool_calls.parquet"
    return pd.read_parquet(path) if path.is_file() else None


@attempt("pi", "forge Pi's events from bash (/proc/$PPID/fd/1): a read of the gold file that never ran, a stop, an overflow")
def pi_forged_events(tmp: Path) -> str:
    """Issue 36: forged tool_execution_start/end made a tool row and a trace message for a read that never happened
    (graded evidence_recall 1.0); a forged closed ended the run as tool_error, a forged compaction_end as
    context_exhausted. The model's commands now run outside Pi's box, and rows come from what the harness ran."""
    p = probe()
    held("FORGE-DONE" in p.out.get("forge", ""), f"the probe did not run: {p.meta.get('stop_reason')} {p.meta.get('stop_detail')}")
    rows = _rows(p)
    held(rows is not None and FORGED_ID not in set(rows["call_id"]), "a tool row for a call that never ran")
    held(rows is not None and not ((rows["tool"] == "read") & rows["arguments"].str.contains("gold", na=False)).any(), "a forged read row")
    messages = [json.loads(line).get("message") or {} for line in (p.run_dir / "trace.jsonl").read_text().splitlines()]
    forged = [m for m in messages if m.get("role") == "tool" and (m.get("tool_call_id") == FORGED_ID or str(m.get("content")).startswith("FORGED:"))]
    held(not forged, f"a forged event in the trace: {forged[:1]}")
    held(p.meta.get("stop_reason") == "budget_spent", f"the run ended as {p.meta.get('stop_reason')}: {p.meta.get('stop_detail')}")
    held("still-here" in p.out.get("after", ""), "Pi stopped serving the model after the forgery")
    return "no row, no trace message, no stop from a forged event: the run went on to its budget"


@attempt("pi", "inject an RPC command into Pi's stdin from bash (/proc/$PPID/fd/0) and signal Pi")
def pi_injected_command(tmp: Path) -> str:
    p = probe()
    held("FORGE-DONE" in p.out.get("forge", ""), "the probe did not run")
    for where in (p.run_dir / "pi" / "box" / "session" / "INJECTED", p.run_dir / "work" / "INJECTED"):
        held(not where.exists(), f"an injected command ran: {where} exists")
    held(p.meta.get("stop_reason") == "budget_spent", f"the run ended as {p.meta.get('stop_reason')}: {p.meta.get('stop_detail')}")
    return "nothing the model runs can write Pi's stdin or signal it"


@attempt("pi", "read host paths from the box: /proc/*/cmdline (bwrap's binds), environ, cwd, root, $HOME, pwd")
def pi_host_paths(tmp: Path) -> str:
    agents.no_host_paths(probe())
    return "the box names only its own paths (/work, /proc, the system)"


@attempt("pi", "call the run's channel socket from a host process outside the box (this user; another user when root)")
def pi_open_channel(tmp: Path) -> str:
    return agents.channel_closed_to_outside(probe())


@attempt("pi", "make Pi die on its own limits: a 500 MB output, a full work/ quota; Pi's settings lock on a read-only folder")
def pi_own_limits(tmp: Path) -> str:
    p = probe()
    flood, fill = p.out.get("flood", ""), p.out.get("fill", "")
    held("output truncated" in flood, f"a 500 MB output was not capped as a tool result: {flood[-200:]!r}")
    held("work/ is full" in fill, f"the quota was not a note the model read: {fill[:300]!r}")
    held(p.meta.get("stop_reason") == "budget_spent" and "still-here" in p.out.get("after", ""),
         f"Pi died: {p.meta.get('stop_reason')}: {p.meta.get('stop_detail')}")
    stderr = p.run_dir / "pi" / "stderr.log"
    said = stderr.read_text(errors="replace") if stderr.is_file() else ""
    held("EROFS" not in said and "ENOSPC" not in said, f"Pi's stderr: {said[-300:]!r}")
    return "the output cap and the quota are tool results the model read; Pi's settings and locks have a folder of their own"


@attempt("pi", "a 140-level folder in work/ (under PATH_MAX): silently gone at the next call?")
def pi_deep_tree(tmp: Path) -> str:
    p = probe()
    out = p.out.get("deep", "")
    held("made" in out and "could not keep" in out, f"the model was not told: {out[:300]!r}")
    return "the call that made it reads which folder work/ could not keep"


@attempt("pi", "node killed mid-call: is the stop named by its cause, and the call the server billed counted?")
def pi_killed_mid_call(tmp: Path) -> str:
    def is_pi(pid: str) -> bool:
        return b"pi-coding-agent/dist/cli.js" in Path(f"/proc/{pid}/cmdline").read_bytes()

    return agents.killed_mid_call(tmp, "pi", _use_real_pi, is_pi, "Pi's node")
